// The built-in JSON Schema of the config: every host-owned field, and the
// base fields of the plugin-owned sections (marked "x-plugin-owned"; their
// other keys pass through to the plugin, whose own options schema is applied
// when a SchemaProvider is given). docs/config-reference.md mirrors it.
//
// Keywords are JSON Schema draft-04 as RapidJSON implements it (boolean
// exclusiveMinimum/exclusiveMaximum), plus our annotations:
//   x-plugin-owned   the section's unknown keys belong to a plugin
//   x-message        how to describe the expected value when it is wrong
//   x-aliases        accepted spellings of enum values ({"WARN": "WARNING"})
// Built-in string enums compare case-insensitively with '-' == '_'.
#include <zcode/core/config.h>

namespace zcode {

const std::string& HarnessConfig::builtin_schema_json() {
  static const std::string schema = R"JSON({
  "type": "object",
  "additionalProperties": false,
  "required": ["data"],
  "properties": {
    "experiment_name": {"type": "string", "default": "zcode_run",
      "pattern": "^[A-Za-z0-9][A-Za-z0-9._-]*$",
      "x-message": "a name of letters, digits, '.', '_' or '-' (it names the run folder)",
      "description": "Run name; the run folder is logging.output_dir/experiment_name."},
    "seed": {"type": "integer", "minimum": 0, "maximum": 18446744073709551615, "default": 42,
      "description": "Global seed; every stage derives its own stream from it."},
    "plugin_path": {"type": ["string", "array"], "items": {"type": "string"}, "default": [],
      "description": "Extra plugin folders (a list, or one colon-separated string), searched after --plugin-path."},
    "overrides": {"type": "array", "items": {"type": "string"},
      "description": "Record of the --set overrides already applied to this config (not re-applied)."},
    "hardware": {"type": "object", "additionalProperties": false, "default": {},
      "properties": {
        "accelerator": {"type": "string", "enum": ["cpu", "gpu"], "default": "cpu"},
        "devices": {"type": "integer", "minimum": 1, "default": 1},
        "mixed_precision": {"type": "boolean", "default": false},
        "num_threads": {"type": "integer", "minimum": 0, "maximum": 4096, "default": 0,
          "description": "Compute threads; 0 = all cores."}
      }},
    "model": {"type": "object", "x-plugin-owned": true, "additionalProperties": true, "default": {},
      "properties": {
        "type": {"type": "string", "minLength": 1, "default": "glm52",
          "description": "Model component (alias GLM5pt2 = glm52)."},
        "variant": {"type": "string", "enum": ["nano", "tiny", "base", "large", "xl"], "default": "nano"},
        "moe_experts": {"type": "integer", "minimum": 1, "default": 8},
        "moe_top_k": {"type": "integer", "minimum": 1, "default": 2},
        "max_seq_len": {"type": "integer", "minimum": 1, "default": 1024},
        "d_model": {"type": "integer", "minimum": 1},
        "n_layers": {"type": "integer", "minimum": 1},
        "n_heads": {"type": "integer", "minimum": 1},
        "n_kv_heads": {"type": "integer", "minimum": 1},
        "head_dim": {"type": "integer", "minimum": 1},
        "ffn_hidden": {"type": "integer", "minimum": 1},
        "moe_ffn_hidden": {"type": "integer", "minimum": 1},
        "moe_shared_experts": {"type": "integer", "minimum": 0},
        "first_dense_layers": {"type": "integer", "minimum": 0},
        "capacity_factor": {"type": "number"},
        "eval_capacity_factor": {"type": "number"},
        "moe_aux_loss_coef": {"type": "number", "minimum": 0},
        "moe_z_loss_coef": {"type": "number", "minimum": 0},
        "norm_topk_prob": {"type": "boolean"},
        "router_activation": {"type": "string", "enum": ["softmax", "sigmoid"]},
        "rope_theta": {"type": "number", "minimum": 0, "exclusiveMinimum": true},
        "rotary_fraction": {"type": "number", "minimum": 0, "maximum": 1},
        "norm": {"type": "string", "enum": ["scalenorm", "rmsnorm"]},
        "residual": {"type": "string", "enum": ["deepnorm", "prenorm"]},
        "norm_eps": {"type": "number", "minimum": 0, "exclusiveMinimum": true},
        "tie_embeddings": {"type": "boolean"},
        "dynamic_head_mask": {"type": "object", "additionalProperties": true,
          "properties": {
            "enabled": {"type": "boolean"},
            "entropy_threshold": {"type": "number", "minimum": 0}
          }}
      }},
    "data": {"type": "object", "x-plugin-owned": true, "additionalProperties": true,
      "required": ["train_path"],
      "properties": {
        "loader": {"type": "string", "minLength": 1, "default": "jsonl"},
        "train_path": {"type": "string", "minLength": 1},
        "val_path": {"type": ["string", "null"], "minLength": 1},
        "train_shard_pattern": {"type": ["string", "null"], "minLength": 1},
        "tokenizer": {"type": ["string", "object"], "minLength": 1, "default": "hf://gpt2",
          "properties": {"type": {"type": "string", "minLength": 1}, "path": {"type": "string", "minLength": 1}}},
        "batch_size": {"type": "integer", "minimum": 1, "default": 8},
        "prefetch_factor": {"type": "integer", "minimum": 1, "default": 2},
        "num_workers": {"type": "integer", "minimum": 0, "default": 2},
        "text_field": {"type": "string", "minLength": 1, "default": "text"},
        "on_bad_record": {"type": "string", "enum": ["error", "skip"], "default": "error"},
        "val_fraction": {"type": "number", "minimum": 0, "maximum": 1, "exclusiveMaximum": true, "default": 0.0},
        "cache_dir": {"type": ["string", "null"], "minLength": 1},
        "cross_document_attention": {"type": "boolean", "default": true},
        "mask_document_boundary": {"type": "boolean", "default": false}
      }},
    "optimizer": {"type": "object", "x-plugin-owned": true, "additionalProperties": true, "default": {},
      "properties": {
        "name": {"type": "string", "minLength": 1, "default": "adamw"},
        "lr": {"type": "number", "minimum": 0, "exclusiveMinimum": true, "default": 0.0003},
        "weight_decay": {"type": "number", "minimum": 0, "default": 0.01},
        "betas": {"type": "array", "minItems": 2, "maxItems": 2, "default": [0.9, 0.999],
          "items": {"type": "number", "minimum": 0, "maximum": 1, "exclusiveMaximum": true}},
        "eps": {"type": "number", "minimum": 0, "exclusiveMinimum": true, "default": 1e-8}
      }},
    "scheduler": {"type": "object", "x-plugin-owned": true, "additionalProperties": true, "default": {},
      "properties": {
        "type": {"type": "string", "minLength": 1, "default": "cosine_with_warmup"},
        "warmup_steps": {"type": "integer", "minimum": 0, "default": 0},
        "stable_steps": {"type": "integer", "minimum": 0, "default": 0},
        "decay_steps": {"type": "integer", "minimum": 0},
        "min_lr_ratio": {"type": "number", "minimum": 0, "maximum": 1, "default": 0.0},
        "power": {"type": "number", "minimum": 0, "exclusiveMinimum": true, "default": 1.0}
      }},
    "training": {"type": "object", "additionalProperties": false, "default": {},
      "properties": {
        "max_steps": {"type": "integer", "minimum": 1, "default": 1000},
        "gradient_accumulation": {"type": "integer", "minimum": 1, "default": 1},
        "clip_grad_norm": {"type": "number", "minimum": 0, "default": 1.0},
        "precision": {"type": "string", "enum": ["fp32", "fp16", "bf16", "fp8"], "default": "fp32"},
        "loss_scale": {"type": "number", "minimum": 0, "exclusiveMinimum": true, "default": 1.0},
        "gradient_checkpointing": {"type": "boolean", "default": false},
        "sequence_parallel": {"type": "boolean", "default": false},
        "sp_group_size": {"type": "integer", "minimum": 1, "default": 1},
        "tensor_parallel": {"type": "boolean", "default": false},
        "tp_group_size": {"type": "integer", "minimum": 1, "default": 1},
        "eval_every": {"type": "integer", "minimum": 1, "default": 500},
        "eval_at_start": {"type": "boolean", "default": true,
          "description": "Evaluate before the first optimizer step of a fresh run (recorded as step 0; not on resume)."},
        "save_every": {"type": "integer", "minimum": 1, "default": 1000},
        "keep_last_n": {"type": "integer", "minimum": 0, "default": 3},
        "log_every": {"type": "integer", "minimum": 1, "default": 10},
        "deterministic": {"type": "boolean", "default": false},
        "max_consecutive_nonfinite": {"type": "integer", "minimum": 1, "default": 5}
      }},
    "logging": {"type": "object", "additionalProperties": false, "default": {},
      "properties": {
        "console_log_level": {"type": "string", "enum": ["TRACE", "DEBUG", "INFO", "WARNING", "ERROR"],
          "x-aliases": {"WARN": "WARNING"}, "default": "INFO"},
        "mlflow": {"type": "boolean", "default": false},
        "wandb": {"type": "boolean", "default": false},
        "tensorboard": {"type": "boolean", "default": false},
        "output_dir": {"type": "string", "minLength": 1, "default": "outputs"}
      }},
    "profiling": {"type": "object", "additionalProperties": false, "default": {},
      "properties": {
        "enabled": {"type": "boolean", "default": false},
        "schedule": {"type": "string", "default": "wait=1,warmup=2,active=3,repeat=2",
          "pattern": "^ *(wait|warmup|active|repeat) *= *[0-9]+ *(, *(wait|warmup|active|repeat) *= *[0-9]+ *)*$",
          "x-message": "comma-separated wait=N,warmup=N,active=N,repeat=N"},
        "trace_handler": {"type": "string", "enum": ["disk", "tensorboard"], "default": "disk"},
        "profile_memory": {"type": "boolean", "default": false},
        "profile_shapes": {"type": "boolean", "default": false}
      }},
    "evaluation": {"type": "object", "x-plugin-owned": true, "additionalProperties": true, "default": {},
      "properties": {
        "plugins": {"type": "array", "items": {"type": "string", "minLength": 1}, "minItems": 1, "default": ["lm"]},
        "split": {"type": "string", "enum": ["val", "train"], "default": "val"},
        "batch_size": {"type": "integer", "minimum": 1},
        "max_batches": {"type": "integer", "minimum": 0, "default": 0,
          "description": "Loader batches per evaluation; 0 = the whole split (Lightning's limit_val_batches)."}
      }},
    "generation": {"type": "object", "additionalProperties": false, "default": {},
      "properties": {
        "strategy": {"type": "string", "enum": ["greedy", "sample", "beam", "contrastive"], "default": "greedy"},
        "max_new_tokens": {"type": "integer", "minimum": 1, "default": 64},
        "temperature": {"type": "number", "minimum": 0, "default": 1.0},
        "top_k": {"type": "integer", "minimum": 0, "default": 0},
        "top_p": {"type": "number", "minimum": 0, "exclusiveMinimum": true, "maximum": 1, "default": 1.0},
        "num_beams": {"type": "integer", "minimum": 1, "default": 1},
        "length_penalty": {"type": "number", "default": 1.0},
        "penalty_alpha": {"type": "number", "minimum": 0, "maximum": 1, "default": 0.0},
        "seed": {"type": "integer", "minimum": 0, "maximum": 18446744073709551615},
        "stop": {"type": "array", "items": {"type": "string", "minLength": 1}, "default": []}
      }},
    "callbacks": {"type": "array",
      "default": [{"type": "console"}, {"type": "metrics_json"}, {"type": "checkpoint"}, {"type": "model_card"}],
      "items": {"type": "object", "x-plugin-owned": true, "additionalProperties": true, "required": ["type"],
        "properties": {"type": {"type": "string", "minLength": 1}, "enabled": {"type": "boolean"}}}},
    "callbacks_replace_defaults": {"type": "boolean", "default": false},
    "model_card": {"type": "object", "additionalProperties": false, "default": {},
      "properties": {
        "template": {"type": "string", "minLength": 1, "description": "Mustache template file for model_card.md."}
      }}
  }
})JSON";
  return schema;
}

}  // namespace zcode
