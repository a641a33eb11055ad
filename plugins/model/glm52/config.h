// glm52/config.h: the resolved GLM-5.2 architecture (variant + overrides).
#pragma once

#include "blocking.h"

#include <zcode/sdk/options.h>

#include <cstdint>
#include <string>
#include <vector>

namespace glm52 {

enum class Norm { kScaleNorm, kRMSNorm };
enum class Residual { kDeepNorm, kPreNorm };
enum class Router { kSoftmax, kSigmoid };

/// Every dimension and block option of the model (README.md, "Config options").
struct Config {
  std::string variant = "tiny";
  int64_t vocab_size = 0;    // V (from the tokenizer or the `vocab_size` option)
  int64_t vocab_padded = 0;  // Vp = V rounded up to a multiple of 128
  int d_model = 0, n_layers = 0, n_heads = 0, n_kv_heads = 0, head_dim = 0, ffn_hidden = 0;
  int moe_experts = 0, moe_top_k = 0, moe_ffn_hidden = 0, moe_shared_experts = 0, first_dense_layers = 0;
  int max_seq_len = 0;
  double capacity_factor = 1.25, moe_aux_loss_coef = 0.01, moe_z_loss_coef = 0.001;
  double eval_capacity_factor = 0.0;  // forward_eval's capacity factor; <= 0: dropless
  bool norm_topk_prob = true;
  Router router_activation = Router::kSoftmax;
  double rope_theta = 10000.0, rotary_fraction = 1.0;
  Norm norm = Norm::kScaleNorm;
  Residual residual = Residual::kDeepNorm;
  double norm_eps = 1e-6;
  bool tie_embeddings = true;
  bool dynamic_head_mask = false;
  double entropy_threshold = 4.0;
  bool cross_document_attention = true;  // from config data.cross_document_attention
  /// The CPU path's blocking: derive_blocking(this_machine()) under the fields
  /// the `blocking` option pins (blocking.h). Not part of the architecture:
  /// it changes the last bits, never the shapes.
  Blocking blocking;

  /// Rotary dims R = 2·floor(rotary_fraction·head_dim/2).
  int rotary_dims() const;
  /// True when layer l uses the MoE FFN (l ≥ first_dense_layers and E > 0).
  bool is_moe(int l) const { return moe_experts > 0 && l >= first_dense_layers; }
  /// DeepNet decoder-only constants (Wang et al. 2022, "DeepNet", Table 1 /
  /// eq. for decoder-only): α = (2L)^(1/4), β = (8L)^(-1/4); prenorm: 1, 1.
  double alpha() const;
  double beta() const;
  int qkv_dim() const { return (n_heads + 2 * n_kv_heads) * head_dim; }
  /// Total parameters and parameters active per token (k of E experts).
  void count_params(uint64_t& total, uint64_t& active) const;
  /// The resolved architecture as a JSON object.
  std::string to_json() const;

  /// Resolves `model` options (prefix "model") over the variant table.
  /// `vocab_from_tokenizer` is used unless the options carry `vocab_size`
  /// (0 = no tokenizer). `config` is the whole run config (reads
  /// data.cross_document_attention). Throws zcode::sdk::Error with a one-line
  /// message naming the option, the value found and what was expected.
  static Config resolve(const zcode::sdk::Options& model, const zcode::sdk::Options& config,
                        int64_t vocab_from_tokenizer);
};

/// Names of the built-in variants, in size order.
const std::vector<std::string>& variant_names();

}  // namespace glm52
