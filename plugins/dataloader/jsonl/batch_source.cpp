#include "batch_source.h"

#include "order.h"

#include <zcode/sdk/error.h>

#include <algorithm>
#include <numeric>

namespace zcode::data {
using sdk::Error;

namespace {
void pad_rows(BatchSlot& s, const PackSpec& spec, uint64_t from) {
  for (uint64_t r = from; r < static_cast<uint64_t>(spec.batch); ++r) {
    size_t o = r * static_cast<size_t>(spec.seq);
    fill_row<int32_t>(nullptr, 0, spec.seq, spec.pad, spec.eos, spec.mask_eos, *spec.lengths, s.input.data() + o,
                      s.target.data() + o, spec.doc_ids ? s.doc.data() + o : nullptr, s.counts);
  }
}
}  // namespace

// ---------------------------------------------------------------------------
// MemmapSource

MemmapSource::MemmapSource(const TokenCache& cache, PackSpec spec) : cache_(cache), spec_(spec) {
  uint64_t w = static_cast<uint64_t>(spec_.seq) + 1;
  windows_ = (cache_.n_tokens() + w - 1) / w;
  if (windows_ > 0xffffffffull)
    throw Error(ZC_ERR_UNSUPPORTED, "data: " + std::to_string(windows_) +
                                        " windows exceed the 2^32 the permutation holds; use data.streaming: true");
  batches_per_epoch_ = (windows_ + spec_.batch - 1) / spec_.batch;
  seek(Cursor{});
}

void MemmapSource::start_epoch(uint64_t epoch) {
  if (spec_.shuffle && !spec_.finite) permutation(windows_, sub_seed(spec_.seed, epoch), perm_);
}

void MemmapSource::seek(const Cursor& c) {
  cur_ = Cursor{};
  cur_.epoch = c.epoch;
  cur_.batch = std::min(c.batch, batches_per_epoch_);
  start_epoch(cur_.epoch);
}

bool MemmapSource::plan(BatchSlot& s) {
  if (cur_.batch == batches_per_epoch_) {
    if (spec_.finite) return false;
    ++cur_.epoch;
    cur_.batch = 0;
    start_epoch(cur_.epoch);
  }
  uint64_t first = cur_.batch * spec_.batch;
  s.rows = std::min<uint64_t>(spec_.batch, windows_ - first);
  for (uint64_t r = 0; r < s.rows; ++r) s.windows[r] = perm_.empty() ? first + r : perm_[first + r];
  s.epoch = cur_.epoch;
  ++cur_.batch;
  s.after = cur_;
  return true;
}

void MemmapSource::fill(BatchSlot& s) {
  const uint64_t w = static_cast<uint64_t>(spec_.seq) + 1;
  const uint64_t n = cache_.n_tokens();
  s.counts = RowCounts{};
  for (uint64_t r = 0; r < s.rows; ++r) {
    uint64_t start = s.windows[r] * w;
    size_t len = static_cast<size_t>(std::min(w, n - start));
    size_t o = r * static_cast<size_t>(spec_.seq);
    int32_t* doc = spec_.doc_ids ? s.doc.data() + o : nullptr;
    if (cache_.token_bytes() == 2)
      fill_row(static_cast<const uint16_t*>(cache_.tokens()) + start, len, spec_.seq, spec_.pad, spec_.eos,
               spec_.mask_eos, *spec_.lengths, s.input.data() + o, s.target.data() + o, doc, s.counts);
    else
      fill_row(static_cast<const int32_t*>(cache_.tokens()) + start, len, spec_.seq, spec_.pad, spec_.eos,
               spec_.mask_eos, *spec_.lengths, s.input.data() + o, s.target.data() + o, doc, s.counts);
  }
  pad_rows(s, spec_, s.rows);
}

// ---------------------------------------------------------------------------
// StreamSource

StreamSource::StreamSource(const std::vector<Shard>& shards, DocReader::Options ropt, sdk::Host host, PackSpec spec,
                           uint64_t shuffle_block,
                           std::function<void(const std::string&, std::vector<int32_t>&)> tokenize,
                           std::vector<ShardCounts>* counts_first_epoch, uint64_t* bad_logged)
    : host_(host),
      spec_(spec),
      block_size_(spec.finite || !spec.shuffle ? 1 : std::max<uint64_t>(1, shuffle_block)),
      tokenize_(std::move(tokenize)),
      counts_(counts_first_epoch),
      reader_(shards, std::move(ropt), host, counts_first_epoch, bad_logged) {
  block_.resize(block_size_);
  for (auto& b : block_) b.reserve(static_cast<size_t>(spec_.seq) + 1);
  seek(Cursor{});
}

bool StreamSource::next_window(std::vector<int32_t>& dst) {
  const size_t need = static_cast<size_t>(spec_.seq) + 1;
  while (pending_.size() - pending_pos_ < need) {
    if (!reader_.next(text_)) break;
    tokenize_(text_, ids_);
    if (ids_.empty()) continue;  // an empty document adds nothing, not even <eos>
    if (pending_pos_ > 0) {
      pending_.erase(pending_.begin(), pending_.begin() + static_cast<std::ptrdiff_t>(pending_pos_));
      pending_pos_ = 0;
    }
    pending_.insert(pending_.end(), ids_.begin(), ids_.end());
    pending_.push_back(spec_.eos);
  }
  size_t avail = pending_.size() - pending_pos_;
  if (avail == 0) return false;
  size_t take = std::min(need, avail);
  dst.assign(pending_.begin() + static_cast<std::ptrdiff_t>(pending_pos_),
             pending_.begin() + static_cast<std::ptrdiff_t>(pending_pos_ + take));
  pending_pos_ += take;
  return true;
}

void StreamSource::load_block() {
  // Record how to rebuild this block: reader position and carried tokens.
  cur_.block = cur_.block_loaded ? cur_.block + 1 : 0;
  cur_.block_start = reader_.pos();
  cur_.carry = std::make_shared<const std::vector<int32_t>>(
      pending_.begin() + static_cast<std::ptrdiff_t>(pending_pos_), pending_.end());
  cur_.block_used = 0;
  cur_.block_loaded = true;
  uint64_t n = 0;
  while (n < block_size_ && next_window(block_[n])) ++n;
  order_.resize(n);
  if (block_size_ > 1) {
    permutation(n, sub_seed(spec_.seed, cur_.epoch, cur_.block), order_);
  } else {
    std::iota(order_.begin(), order_.end(), 0u);
  }
}

void StreamSource::seek(const Cursor& c) {
  cur_ = c;
  pending_.clear();
  pending_pos_ = 0;
  order_.clear();
  reader_.set_counts(c.epoch == 0 ? counts_ : nullptr);
  if (!c.block_loaded) {
    reader_.seek(ReaderPos{});
    cur_.block_used = 0;
    return;
  }
  // Rebuild the saved block exactly: same start, same carry, same seed.
  reader_.seek(c.block_start);
  if (c.carry) pending_ = *c.carry;
  cur_.block_loaded = c.block > 0;  // load_block() advances to c.block
  cur_.block = c.block - (c.block > 0 ? 1 : 0);
  load_block();
  cur_.block_used = std::min<uint64_t>(c.block_used, order_.size());
}

bool StreamSource::plan(BatchSlot& s) {
  s.rows = 0;
  s.counts = RowCounts{};
  s.epoch = cur_.epoch;
  const uint64_t B = static_cast<uint64_t>(spec_.batch);
  while (s.rows < B) {
    if (!cur_.block_loaded || cur_.block_used == order_.size()) {
      load_block();
      if (order_.empty()) {     // the epoch's stream is exhausted
        if (s.rows > 0) break;  // its last batch is padded, the next starts a new epoch
        if (spec_.finite) return false;
        if (cur_.batch == 0)  // a whole epoch without one window
          throw Error(ZC_ERR_DATA, "data: the split has no documents (every record empty, skipped or filtered)");
        ++cur_.epoch;
        cur_.batch = 0;
        cur_.block = 0;
        cur_.block_loaded = false;
        reader_.seek(ReaderPos{});
        reader_.set_counts(nullptr);
        pending_.clear();
        pending_pos_ = 0;
        s.epoch = cur_.epoch;
        continue;
      }
    }
    const std::vector<int32_t>& w = block_[order_[cur_.block_used++]];
    size_t o = s.rows * static_cast<size_t>(spec_.seq);
    fill_row(w.data(), w.size(), spec_.seq, spec_.pad, spec_.eos, spec_.mask_eos, *spec_.lengths, s.input.data() + o,
             s.target.data() + o, spec_.doc_ids ? s.doc.data() + o : nullptr, s.counts);
    ++s.rows;
  }
  pad_rows(s, spec_, s.rows);
  ++cur_.batch;
  s.after = cur_;
  return true;
}

}  // namespace zcode::data
