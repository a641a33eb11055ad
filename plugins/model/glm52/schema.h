// glm52/schema.h: JSON Schema of the `model` section (README.md, "Config options"),
// the one home of the model's options and their defaults: the host validates
// the section against it and fills its defaults; Config::resolve falls back to
// the same defaults (schema_default) when used directly. The host owns only
// model.type and model.max_seq_len (core's field table).
#pragma once

namespace glm52 {

inline constexpr const char* kOptionsSchema = R"JSON({
 "type": "object",
 "description": "GLM-5.2 sparse MoE transformer (CPU, fp32). Dims default to the variant's (README.md table).",
 "properties": {
  "type": {"type": "string", "description": "glm52 (alias GLM5pt2)"},
  "variant": {"type": "string", "enum": ["nano", "tiny", "base", "large", "xl"], "default": "nano"},
  "vocab_size": {"type": "integer", "minimum": 1, "description": "explicit vocabulary size (default: the tokenizer's)"},
  "d_model": {"type": "integer", "minimum": 1},
  "n_layers": {"type": "integer", "minimum": 1},
  "n_heads": {"type": "integer", "minimum": 1},
  "n_kv_heads": {"type": "integer", "minimum": 1, "description": "grouped KV heads; divides n_heads (default n_heads when n_heads is set)"},
  "head_dim": {"type": "integer", "minimum": 1, "maximum": 1024, "description": "default d_model / n_heads"},
  "ffn_hidden": {"type": "integer", "minimum": 1, "description": "hidden size of the dense GLU layers"},
  "moe_experts": {"type": "integer", "minimum": 1, "maximum": 1024, "default": 8, "description": "routed experts E (the tokenizer adds <expert_i> for each); default 8 whatever the variant, as the host has always filled it (used without the host: the variant's)"},
  "moe_top_k": {"type": "integer", "minimum": 1, "default": 2, "description": "experts per token k, at most moe_experts"},
  "moe_ffn_hidden": {"type": "integer", "minimum": 1, "description": "hidden size F of each expert"},
  "moe_shared_experts": {"type": "integer", "minimum": 0, "default": 0},
  "first_dense_layers": {"type": "integer", "minimum": 0, "description": "layers l < this use the dense GLU; at most n_layers"},
  "capacity_factor": {"type": "number", "default": 1.25, "description": "C = ceil(cf*N*k/E); <= 0 means dropless"},
  "eval_capacity_factor": {"type": "number", "default": 0, "description": "capacity factor of evaluation (forward_eval); <= 0 (default) means dropless, so results do not depend on evaluation.batch_size; set it to capacity_factor to evaluate with training's drops"},
  "moe_aux_loss_coef": {"type": "number", "minimum": 0, "default": 0.01},
  "moe_z_loss_coef": {"type": "number", "minimum": 0, "default": 0.001},
  "norm_topk_prob": {"type": "boolean", "default": true},
  "router_activation": {"type": "string", "enum": ["softmax", "sigmoid"], "default": "softmax"},
  "max_seq_len": {"type": "integer", "minimum": 1},
  "rope_theta": {"type": "number", "default": 10000.0},
  "rotary_fraction": {"type": "number", "minimum": 0, "maximum": 1, "default": 1.0},
  "norm": {"type": "string", "enum": ["scalenorm", "rmsnorm"], "default": "scalenorm"},
  "residual": {"type": "string", "enum": ["deepnorm", "prenorm"], "default": "deepnorm"},
  "norm_eps": {"type": "number", "default": 1e-6},
  "tie_embeddings": {"type": "boolean", "default": true},
  "dynamic_head_mask": {
   "type": "object",
   "properties": {
    "enabled": {"type": "boolean", "default": false},
    "entropy_threshold": {"type": "number", "minimum": 0, "default": 4.0, "description": "nats"}
   },
   "additionalProperties": false
  },
  "blocking": {
   "type": "object",
   "description": "the CPU path's blocking (plugins/model/glm52/README.md, \"Blocking\"); a field left out is derived from this machine's caches and CPU count at setup. The resolved value is recorded in the checkpoint and reused on resume (fields written here win over the record). Changes the last bits of results, never the shapes",
   "properties": {
    "head_fused_slice": {"type": "integer", "minimum": 16, "maximum": 65536, "description": "vocab columns per slice of the fused LM head (a multiple of 16); derived: the largest power of two whose logits slice, packed W slice and h fit in L2"},
    "head_fused_groups": {"type": "integer", "minimum": 1, "maximum": 64, "description": "fixed partial-dh groups of the fused LM head (its most threads); derived: 6 per online CPU, 12..64"},
    "logits_chunk_elems": {"type": "integer", "minimum": 4096, "description": "LM-head logits chunk in elements (sets the row chunk); 15204352 on every machine"},
    "head_slice": {"type": "integer", "minimum": 16, "description": "W rows per GEMM of the unfused LM head; 4096 on every machine"},
    "attn_tile": {"type": "integer", "minimum": 1, "description": "query rows per attention tile; 64 on every machine"},
    "embed_grad_cols": {"type": "integer", "minimum": 1, "description": "columns per block of the embedding gradient; derived: 4 cache lines of fp32"},
    "expert_alone_share": {"type": "number", "exclusiveMinimum": 0, "description": "an expert with more than this share of an even split of the rows runs alone on every thread; 1.0 on every machine"}
   },
   "additionalProperties": false
  }
 },
 "additionalProperties": false
})JSON";

}  // namespace glm52
