#include "config.h"

#include "schema.h"

#include <zcode/sdk/error.h>
#include <zcode/sdk/json.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <sstream>

namespace glm52 {
namespace {

using zcode::sdk::invalid_argument;

struct Variant {
  const char* name;
  int d_model, n_layers, n_heads, n_kv_heads, head_dim, ffn_hidden;
  int moe_experts, moe_top_k, moe_ffn_hidden, first_dense_layers, max_seq_len;
};
// Dims chosen so that total parameters (with a GPT-2 vocabulary, 50257) land
// near the guide's sizes; README.md lists the computed counts.
constexpr Variant kVariants[] = {
    {"nano", 128, 4, 4, 2, 32, 512, 8, 2, 256, 1, 256},
    {"tiny", 512, 8, 8, 4, 64, 2048, 8, 2, 1024, 1, 1024},
    {"base", 1024, 16, 16, 4, 64, 4096, 64, 2, 512, 1, 4096},
    {"large", 2048, 24, 16, 4, 128, 8192, 64, 2, 1024, 1, 8192},
    {"xl", 4096, 32, 32, 8, 128, 16384, 64, 2, 2048, 1, 32768},
};

const char* const kKeys[] = {"type",
                             "variant",
                             "vocab_size",
                             "d_model",
                             "n_layers",
                             "n_heads",
                             "n_kv_heads",
                             "head_dim",
                             "ffn_hidden",
                             "moe_experts",
                             "moe_top_k",
                             "moe_ffn_hidden",
                             "moe_shared_experts",
                             "first_dense_layers",
                             "capacity_factor",
                             "eval_capacity_factor",
                             "moe_aux_loss_coef",
                             "moe_z_loss_coef",
                             "norm_topk_prob",
                             "router_activation",
                             "max_seq_len",
                             "rope_theta",
                             "rotary_fraction",
                             "norm",
                             "residual",
                             "norm_eps",
                             "tie_embeddings",
                             "dynamic_head_mask",
                             "blocking"};

std::string lower_name(std::string s) {
  for (char& c : s) c = c == '-' ? '_' : static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
  return s;
}

template <class T>
std::string quoted(const T& v) {
  std::ostringstream o;
  o << v;
  return o.str();
}

void need(bool ok, const std::string& msg) {
  if (!ok) invalid_argument(msg);
}

// The `default` of each option in kOptionsSchema, as Options: the one home of
// the defaults, which the host also fills into the section it passes.
const zcode::sdk::Options& schema_defaults() {
  static const zcode::sdk::Options defaults = [] {
    rapidjson::Document schema;
    schema.Parse(kOptionsSchema);
    zcode::sdk::json::Writer w;
    w.begin_object();
    auto add = [&](const rapidjson::Value& props) {
      for (auto it = props.MemberBegin(); it != props.MemberEnd(); ++it)
        if (it->value.IsObject() && it->value.HasMember("default"))
          w.key(it->name.GetString()).raw(zcode::sdk::to_json(it->value["default"]));
    };
    add(schema["properties"]);
    w.end_object();
    return zcode::sdk::Options(w.str().c_str(), "model");
  }();
  return defaults;
}

// The schema's default of `key` (which must declare one).
template <class T>
T schema_default(const char* key) {
  return schema_defaults().require<T>(key);
}

}  // namespace

const std::vector<std::string>& variant_names() {
  static const std::vector<std::string> names = [] {
    std::vector<std::string> v;
    for (const Variant& x : kVariants) v.push_back(x.name);
    return v;
  }();
  return names;
}

int Config::rotary_dims() const { return 2 * static_cast<int>(std::floor(rotary_fraction * head_dim / 2.0)); }
double Config::alpha() const { return residual == Residual::kDeepNorm ? std::pow(2.0 * n_layers, 0.25) : 1.0; }
double Config::beta() const { return residual == Residual::kDeepNorm ? std::pow(8.0 * n_layers, -0.25) : 1.0; }

void Config::count_params(uint64_t& total, uint64_t& active) const {
  const uint64_t d = d_model, hd = head_dim;
  const uint64_t gain = norm == Norm::kScaleNorm ? 1 : d;
  uint64_t t = static_cast<uint64_t>(vocab_padded) * d * (tie_embeddings ? 1 : 2);
  uint64_t inactive = 0;
  for (int l = 0; l < n_layers; ++l) {
    t += 2 * gain;                                                     // attn_norm, ffn_norm
    t += (n_heads * hd + 2 * n_kv_heads * hd) * d + d * n_heads * hd;  // wq wk wv wo
    t += static_cast<uint64_t>(rotary_dims() / 2);                     // rope_log_inv_freq
    if (is_moe(l)) {
      const uint64_t expert = 3ull * moe_ffn_hidden * d;
      t += static_cast<uint64_t>(moe_experts) * d + (moe_experts + moe_shared_experts) * expert;
      inactive += static_cast<uint64_t>(moe_experts - moe_top_k) * expert;
    } else {
      t += 3ull * ffn_hidden * d;
    }
  }
  if (residual == Residual::kPreNorm) t += gain;  // norm_f
  total = t;
  active = t - inactive;
}

std::string Config::to_json() const {
  uint64_t total = 0, active = 0;
  count_params(total, active);
  // Doubles as %.17g (round-trip), the format this info_json has always had.
  auto d = [](zcode::sdk::json::Writer& w, const char* k, double v) { w.key(k).number(v, 17); };
  zcode::sdk::json::Writer w;
  w.begin_object().key("name").string("glm52").key("variant").string(variant);
  w.key("vocab_size").integer(vocab_size).key("vocab_padded").integer(vocab_padded);
  w.key("d_model").integer(d_model).key("n_layers").integer(n_layers).key("n_heads").integer(n_heads);
  w.key("n_kv_heads").integer(n_kv_heads).key("head_dim").integer(head_dim).key("ffn_hidden").integer(ffn_hidden);
  w.key("moe_experts").integer(moe_experts).key("moe_top_k").integer(moe_top_k);
  w.key("moe_ffn_hidden").integer(moe_ffn_hidden).key("moe_shared_experts").integer(moe_shared_experts);
  w.key("first_dense_layers").integer(first_dense_layers).key("max_seq_len").integer(max_seq_len);
  d(w, "capacity_factor", capacity_factor);
  d(w, "eval_capacity_factor", eval_capacity_factor);
  d(w, "moe_aux_loss_coef", moe_aux_loss_coef);
  d(w, "moe_z_loss_coef", moe_z_loss_coef);
  w.key("norm_topk_prob").boolean(norm_topk_prob);
  w.key("router_activation").string(router_activation == Router::kSoftmax ? "softmax" : "sigmoid");
  d(w, "rope_theta", rope_theta);
  d(w, "rotary_fraction", rotary_fraction);
  w.key("rotary_dims").integer(rotary_dims());
  w.key("norm").string(norm == Norm::kScaleNorm ? "scalenorm" : "rmsnorm");
  w.key("residual").string(residual == Residual::kDeepNorm ? "deepnorm" : "prenorm");
  d(w, "norm_eps", norm_eps);
  w.key("tie_embeddings").boolean(tie_embeddings);
  w.key("dynamic_head_mask").begin_object().key("enabled").boolean(dynamic_head_mask);
  d(w, "entropy_threshold", entropy_threshold);
  w.end_object();
  w.key("cross_document_attention").boolean(cross_document_attention);
  d(w, "deepnorm_alpha", alpha());
  d(w, "deepnorm_beta", beta());
  w.key("params_total").integer(total).key("params_active").integer(active).end_object();
  return w.str();
}

Config Config::resolve(const zcode::sdk::Options& m, const zcode::sdk::Options& config, int64_t vocab_tok) {
  // Unknown keys: the host validates against the schema; this repeats it for
  // direct users (tests, embedding) so a typo is never silently ignored.
  const rapidjson::Value& obj = m.json();
  for (auto it = obj.MemberBegin(); it != obj.MemberEnd(); ++it) {
    const std::string k(it->name.GetString(), it->name.GetStringLength());
    if (std::find(std::begin(kKeys), std::end(kKeys), k) == std::end(kKeys))
      invalid_argument(m.path(k) + ": unknown option (see `zcode-host plugins show glm52`)");
  }
  Config c;
  if (m.has("type")) {
    const std::string t = lower_name(m.get<std::string>("type", "glm52"));
    need(t == "glm52" || t == "glm5pt2", m.path("type") + ": '" + t + "' is not this model (expected glm52)");
  }
  c.variant = lower_name(m.get<std::string>("variant", schema_default<std::string>("variant")));
  const Variant* v = nullptr;
  for (const Variant& x : kVariants)
    if (c.variant == x.name) v = &x;
  if (!v)
    invalid_argument(m.path("variant") + ": unknown model variant '" + c.variant +
                     "' (expected one of: nano, tiny, base, large, xl)");
  c.d_model = m.get<int>("d_model", v->d_model);
  c.n_layers = m.get<int>("n_layers", v->n_layers);
  c.n_heads = m.get<int>("n_heads", v->n_heads);
  c.n_kv_heads = m.get<int>("n_kv_heads", m.has("n_heads") ? c.n_heads : v->n_kv_heads);
  c.head_dim =
      m.get<int>("head_dim", (m.has("d_model") || m.has("n_heads")) ? c.d_model / std::max(1, c.n_heads) : v->head_dim);
  c.ffn_hidden = m.get<int>("ffn_hidden", v->ffn_hidden);
  c.moe_experts = m.get<int>("moe_experts", v->moe_experts);
  c.moe_top_k = m.get<int>("moe_top_k", v->moe_top_k);
  c.moe_ffn_hidden = m.get<int>("moe_ffn_hidden", v->moe_ffn_hidden);
  c.moe_shared_experts = m.get<int>("moe_shared_experts", schema_default<int>("moe_shared_experts"));
  c.first_dense_layers = m.get<int>("first_dense_layers", v->first_dense_layers);
  c.max_seq_len = m.get<int>("max_seq_len", v->max_seq_len);
  c.capacity_factor = m.get<double>("capacity_factor", schema_default<double>("capacity_factor"));
  c.eval_capacity_factor = m.get<double>("eval_capacity_factor", schema_default<double>("eval_capacity_factor"));
  c.moe_aux_loss_coef = m.get<double>("moe_aux_loss_coef", schema_default<double>("moe_aux_loss_coef"));
  c.moe_z_loss_coef = m.get<double>("moe_z_loss_coef", schema_default<double>("moe_z_loss_coef"));
  c.norm_topk_prob = m.get<bool>("norm_topk_prob", schema_default<bool>("norm_topk_prob"));
  c.rope_theta = m.get<double>("rope_theta", schema_default<double>("rope_theta"));
  c.rotary_fraction = m.get<double>("rotary_fraction", schema_default<double>("rotary_fraction"));
  c.norm_eps = m.get<double>("norm_eps", schema_default<double>("norm_eps"));
  c.tie_embeddings = m.get<bool>("tie_embeddings", schema_default<bool>("tie_embeddings"));

  const std::string ra =
      lower_name(m.get<std::string>("router_activation", schema_default<std::string>("router_activation")));
  if (ra == "softmax") c.router_activation = Router::kSoftmax;
  else if (ra == "sigmoid") c.router_activation = Router::kSigmoid;
  else invalid_argument(m.path("router_activation") + ": '" + ra + "' (expected softmax or sigmoid)");
  const std::string nm = lower_name(m.get<std::string>("norm", schema_default<std::string>("norm")));
  if (nm == "scalenorm") c.norm = Norm::kScaleNorm;
  else if (nm == "rmsnorm") c.norm = Norm::kRMSNorm;
  else invalid_argument(m.path("norm") + ": '" + nm + "' (expected scalenorm or rmsnorm)");
  const std::string rs = lower_name(m.get<std::string>("residual", schema_default<std::string>("residual")));
  if (rs == "deepnorm") c.residual = Residual::kDeepNorm;
  else if (rs == "prenorm") c.residual = Residual::kPreNorm;
  else invalid_argument(m.path("residual") + ": '" + rs + "' (expected deepnorm or prenorm)");

  const zcode::sdk::Options dhm = m.object("dynamic_head_mask");
  for (auto it = dhm.json().MemberBegin(); it != dhm.json().MemberEnd(); ++it) {
    const std::string k(it->name.GetString(), it->name.GetStringLength());
    if (k != "enabled" && k != "entropy_threshold")
      invalid_argument(dhm.path(k) + ": unknown option (expected enabled, entropy_threshold)");
  }
  c.dynamic_head_mask = dhm.get<bool>("enabled", false);
  c.entropy_threshold = dhm.get<double>("entropy_threshold", 4.0);

  c.cross_document_attention = config.object("data").get<bool>("cross_document_attention", true);
  c.blocking = apply_blocking_options(m.object("blocking"), derive_blocking(this_machine()));

  const int64_t vocab_opt = m.get<int64_t>("vocab_size", 0);
  c.vocab_size = m.has("vocab_size") ? vocab_opt : vocab_tok;
  if (c.vocab_size <= 0)
    invalid_argument(m.has("vocab_size") ? m.path("vocab_size") + ": " + quoted(vocab_opt) + " (expected >= 1)"
                                         : "model: no vocabulary size (no tokenizer, and no model.vocab_size)");
  need(c.vocab_size < (int64_t{1} << 31) - 128, m.path("vocab_size") + ": too large");
  c.vocab_padded = (c.vocab_size + 127) / 128 * 128;

  auto pos = [&](const char* key, int value) {
    need(value >= 1, m.path(key) + ": " + quoted(value) + " (expected >= 1)");
  };
  pos("d_model", c.d_model);
  pos("n_layers", c.n_layers);
  pos("n_heads", c.n_heads);
  pos("n_kv_heads", c.n_kv_heads);
  pos("head_dim", c.head_dim);
  pos("max_seq_len", c.max_seq_len);
  // A derived head_dim is d_model's problem: name the option the user wrote.
  if (!m.has("head_dim") && c.head_dim > 1024)
    invalid_argument(
        m.path("d_model") + ": " + quoted(c.d_model) + " gives head_dim = d_model / n_heads = " + quoted(c.head_dim) +
        ", above the 1024 the attention supports (expected d_model <= " + std::to_string(int64_t{1024} * c.n_heads) +
        " for " + quoted(c.n_heads) + " heads, or set model.head_dim)");
  need(c.head_dim <= 1024, m.path("head_dim") + ": " + quoted(c.head_dim) + " (expected <= 1024)");
  need(c.n_heads % c.n_kv_heads == 0,
       m.path("n_kv_heads") + ": " + quoted(c.n_kv_heads) + " does not divide n_heads " + quoted(c.n_heads));
  need(c.moe_experts >= 0 && c.moe_experts <= 1024,
       m.path("moe_experts") + ": " + quoted(c.moe_experts) + " (expected 0..1024)");
  need(c.first_dense_layers >= 0,
       m.path("first_dense_layers") + ": " + quoted(c.first_dense_layers) + " (expected >= 0)");
  // Written both: more dense layers than layers is a typo, not "all dense" (the
  // host's validation has always refused it, in these words).
  need(!m.has("first_dense_layers") || !m.has("n_layers") || c.first_dense_layers <= c.n_layers,
       m.path("first_dense_layers") + ": " + quoted(c.first_dense_layers) + " exceeds " + m.path("n_layers") + " (" +
           quoted(c.n_layers) + ")");
  bool any_dense = false, any_moe = false;
  for (int l = 0; l < c.n_layers; ++l) (c.is_moe(l) ? any_moe : any_dense) = true;
  if (any_dense) pos("ffn_hidden", c.ffn_hidden);
  if (any_moe) {
    pos("moe_ffn_hidden", c.moe_ffn_hidden);
    need(c.moe_top_k >= 1 && c.moe_top_k <= c.moe_experts, m.path("moe_top_k") + ": " + quoted(c.moe_top_k) +
                                                               " (expected 1..moe_experts = " + quoted(c.moe_experts) +
                                                               ")");
    need(c.moe_shared_experts >= 0,
         m.path("moe_shared_experts") + ": " + quoted(c.moe_shared_experts) + " (expected >= 0)");
  }
  need(std::isfinite(c.capacity_factor), m.path("capacity_factor") + ": must be finite");
  need(std::isfinite(c.eval_capacity_factor), m.path("eval_capacity_factor") + ": must be finite");
  need(c.moe_aux_loss_coef >= 0, m.path("moe_aux_loss_coef") + ": " + quoted(c.moe_aux_loss_coef) + " (expected >= 0)");
  need(c.moe_z_loss_coef >= 0, m.path("moe_z_loss_coef") + ": " + quoted(c.moe_z_loss_coef) + " (expected >= 0)");
  need(c.rope_theta > 1, m.path("rope_theta") + ": " + quoted(c.rope_theta) + " (expected > 1)");
  need(c.rotary_fraction >= 0 && c.rotary_fraction <= 1,
       m.path("rotary_fraction") + ": " + quoted(c.rotary_fraction) + " (expected 0..1)");
  need(c.norm_eps > 0, m.path("norm_eps") + ": " + quoted(c.norm_eps) + " (expected > 0)");
  need(c.entropy_threshold >= 0,
       dhm.path("entropy_threshold") + ": " + quoted(c.entropy_threshold) + " (expected >= 0)");
  return c;
}

}  // namespace glm52
