// schema.h: JSON Schema of the whole `data` section the jsonl loader
// receives (the host validates it before create; `plugins show jsonl`
// prints it with the defaults).
#pragma once

namespace zcode::data {

inline constexpr const char* kDataSchema = R"JSON({
  "type": "object",
  "additionalProperties": false,
  "properties": {
    "train_path": {"type": "string", "description": "JSONL file, folder of *.jsonl[.gz|.zst], glob, or folder used with train_shard_pattern"},
    "val_path": {"type": ["string", "null"], "default": null, "description": "validation JSONL (file, folder or glob); null: use val_fraction of train"},
    "train_shard_pattern": {"type": ["string", "null"], "default": null, "description": "Python-format index pattern inside train_path, e.g. part-{:05d}.jsonl; shards 0..N until the first missing"},
    "tokenizer": {"type": ["string", "object"], "description": "tokenizer reference; consumed by the host, which hands the instance to the loader"},
    "loader": {"type": "string", "default": "jsonl", "description": "data loader component; consumed by the host"},
    "batch_size": {"type": "integer", "minimum": 1, "default": 8, "description": "rows (windows of max_seq_len tokens) per batch"},
    "prefetch_factor": {"type": "integer", "minimum": 1, "default": 2, "description": "batches prepared ahead per worker"},
    "num_workers": {"type": "integer", "minimum": 0, "maximum": 256, "default": 1, "description": "worker threads preparing batches; 0 = synchronous in next_batch"},
    "text_field": {"type": "string", "default": "text", "description": "field holding the document text; dotted path for nested objects (meta.body)"},
    "on_bad_record": {"enum": ["error", "skip"], "default": "error", "description": "error: fail with file:line:col; skip: count, log the first 5"},
    "val_fraction": {"type": "number", "minimum": 0, "maximum": 1, "default": 0, "description": "fraction of train documents held out for val when val_path is null (hash of file name and record index)"},
    "cache_dir": {"type": ["string", "null"], "default": null, "description": "token cache folder; null: ./.cache/zcode/tokens under the working directory"},
    "cross_document_attention": {"type": "boolean", "default": true, "description": "false: batches carry doc_ids so the model masks attention across documents"},
    "mask_document_boundary": {"type": "boolean", "default": false, "description": "true: the target of each <eos> is ignored (-1), so no loss predicts a document's first token from the previous document"},
    "streaming": {"enum": ["auto", true, false], "default": "auto", "description": "true: tokenize on the fly (no cache); auto: streaming when the input exceeds streaming_threshold_bytes"},
    "streaming_threshold_bytes": {"type": "integer", "minimum": 0, "default": 68719476736, "description": "input size above which streaming: auto streams"},
    "shuffle": {"type": "boolean", "default": true, "description": "shuffle train windows (val is always in order)"},
    "shuffle_block": {"type": "integer", "minimum": 1, "default": 1024, "description": "streaming mode: windows read and shuffled together"}
  },
  "required": ["train_path"]
})JSON";

}  // namespace zcode::data
