// batch_source.h: where the windows of a batch come from, in which order.
//
// Two sources share one interface:
//   MemmapSource  the token cache; a fresh permutation of all windows each
//                 epoch (train) or the windows in order (val).
//   StreamSource  documents read, tokenized and packed on the fly, shuffled
//                 in blocks of `shuffle_block` windows (train) or in order
//                 (val); nothing but the current block is held in memory.
// A batch is made in two steps: plan() runs under the prefetcher's lock, one
// batch at a time, and advances the cursor; fill() may run for several
// batches at once on different workers (the memmap copy). StreamSource does
// all its work in plan(), since reading and tokenizing are sequential.
#pragma once

#include "jsonl_reader.h"
#include "packer.h"
#include "token_cache.h"

#include <memory>
#include <string>
#include <vector>

namespace zcode::data {

/// The exact position of an iterator between two batches. save_state writes
/// the cursor after the last batch handed out; load_state seeks to it.
struct Cursor {
  uint64_t epoch = 0;
  uint64_t batch = 0;  // batches handed out in this epoch
  // StreamSource only: the block being served, how to rebuild it, and how
  // many of its windows were used.
  uint64_t block = 0;                                 // block index in the epoch
  ReaderPos block_start;                              // reader before the block
  std::shared_ptr<const std::vector<int32_t>> carry;  // packed-but-unused tokens before the block
  uint64_t block_used = 0;                            // windows of the block already served
  bool block_loaded = false;                          // false before the first block of an epoch
};

/// One prefetched batch: owned buffers, reused (no allocation per step).
struct BatchSlot {
  std::vector<int32_t> input, target, doc;  // [batch * seq]
  std::vector<uint64_t> windows;            // memmap: window index per row
  uint64_t rows = 0;                        // rows holding real windows
  uint64_t epoch = 0;
  RowCounts counts;
  Cursor after;              // cursor once this batch is consumed
  bool end = false;          // end of a finite split (no batch)
  std::exception_ptr error;  // a worker's failure, rethrown by next_batch
};

/// Shape and packing settings shared by both sources.
struct PackSpec {
  int32_t batch = 1;
  int32_t seq = 1;  // max_seq_len; windows hold seq + 1 tokens
  int32_t pad = 0, eos = 2;
  bool doc_ids = false;   // cross_document_attention: false
  bool mask_eos = false;  // mask_document_boundary: the target of each <eos> is -1
  bool finite = false;    // val: one pass, then end
  bool shuffle = true;
  uint64_t seed = 0;  // derive_seed("data/<split>")
  const TokenLengths* lengths = nullptr;
};

class BatchSource {
 public:
  virtual ~BatchSource() = default;
  /// Moves to `c` (a default Cursor is the start of epoch 0).
  virtual void seek(const Cursor& c) = 0;
  /// Decides the next batch into `s` (rows, epoch, s.after); false at the
  /// end of a finite split. Never called concurrently.
  virtual bool plan(BatchSlot& s) = 0;
  /// Fills `s`'s rows; may run concurrently for different slots.
  virtual void fill(BatchSlot& s) = 0;
};

/// Batches from a TokenCache.
class MemmapSource : public BatchSource {
 public:
  MemmapSource(const TokenCache& cache, PackSpec spec);
  void seek(const Cursor& c) override;
  bool plan(BatchSlot& s) override;
  void fill(BatchSlot& s) override;
  uint64_t num_windows() const { return windows_; }

 private:
  void start_epoch(uint64_t epoch);
  const TokenCache& cache_;
  PackSpec spec_;
  uint64_t windows_;
  uint64_t batches_per_epoch_;
  Cursor cur_;
  std::vector<uint32_t> perm_;  // this epoch's window order (train)
};

/// Batches tokenized on the fly from the shards.
class StreamSource : public BatchSource {
 public:
  /// `tokenize(text, ids)` replaces ids with the text's ids (it serialises
  /// tokenizer access itself). `counts_first_epoch` receives per-shard
  /// counts while epoch 0 is read.
  StreamSource(const std::vector<Shard>& shards, DocReader::Options ropt, sdk::Host host, PackSpec spec,
               uint64_t shuffle_block, std::function<void(const std::string&, std::vector<int32_t>&)> tokenize,
               std::vector<ShardCounts>* counts_first_epoch, uint64_t* bad_logged);
  void seek(const Cursor& c) override;
  bool plan(BatchSlot& s) override;
  void fill(BatchSlot&) override {}

 private:
  bool next_window(std::vector<int32_t>& dst);  // false when the epoch's stream is exhausted
  void load_block();                            // reads the next block from the reader
  sdk::Host host_;
  PackSpec spec_;
  uint64_t block_size_;
  std::function<void(const std::string&, std::vector<int32_t>&)> tokenize_;
  std::vector<ShardCounts>* counts_;
  DocReader reader_;
  Cursor cur_;
  std::vector<int32_t> pending_;  // packed tokens not yet in a window (from pending_pos_)
  size_t pending_pos_ = 0;
  std::vector<std::vector<int32_t>> block_;  // windows of the current block
  std::vector<uint32_t> order_;              // serving order within the block
  std::string text_;
  std::vector<int32_t> ids_;
};

}  // namespace zcode::data
