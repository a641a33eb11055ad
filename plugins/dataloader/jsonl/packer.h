// packer.h: token windows into batch rows.
//
// The corpus of a split is one stream: doc_0 <eos> doc_1 <eos> ... . It is cut
// into windows of max_seq_len + 1 tokens (the last one may be shorter). A
// window w of length L fills one row of T = max_seq_len positions:
//   input_ids[j] = w[j], targets[j] = w[j+1]      for j < L - 1
//   input_ids[j] = <pad>, targets[j] = -1          for j >= L - 1
// so each window yields L - 1 training targets and every token of the stream
// lies in exactly one window. doc_ids[j] numbers the documents within the row
// (0 for the first, partial or not): a new document starts after each <eos>
// input; padding positions form one more document of their own.
//
// With data.mask_document_boundary (`mask_eos`), the target of each <eos>
// input is -1: the prediction of the next document's first token from the end
// of the previous one is not trained (torchtitan PR 2560) and is not counted
// in the row's target tokens, bytes or characters.
#pragma once

#include <zcode/sdk/stages.h>

#include <cstdint>
#include <utility>
#include <vector>

namespace zcode::data {

/// UTF-8 bytes and Unicode code points of each token id's text, computed
/// once from the tokenizer's decode of that id alone. Specials count 0 (their
/// marker text is not corpus text). Code points of a byte-level token are its
/// bytes that are not UTF-8 continuation bytes (10xxxxxx), so sums over a
/// valid UTF-8 token sequence give its exact code-point count even when one
/// character spans several tokens.
struct TokenLengths {
  /// Per id: bytes in the low 16 bits, code points in the high 16 (one
  /// load per target in the packing loop; a token's text is < 64 KiB).
  std::vector<uint32_t> packed;  // [vocab]
  /// Ids the tokenizer could not decode alone (unassigned; length 0).
  uint64_t unassigned = 0;
  uint32_t bytes(int32_t id) const { return packed[id] & 0xFFFFu; }
  uint32_t chars(int32_t id) const { return packed[id] >> 16; }
  /// Decodes every id in [0, vocab) once. `specials`: ids that count 0, as
  /// do ids the tokenizer rejects as invalid arguments (unassigned ids of a
  /// vocabulary with gaps; counted in `unassigned`). Throws the tokenizer's
  /// error (StatusError) when a decode fails otherwise, and
  /// Error(ZC_ERR_UNSUPPORTED) for a token text of 64 KiB or more.
  /// `unassigned`: half-open [first, end) id ranges the tokenizer's info_json
  /// declares unassigned ("unassigned_ids"): length 0, not decoded.
  static TokenLengths build(const sdk::TokenizerRef& tok, uint64_t vocab, const std::vector<int32_t>& specials,
                            const std::vector<std::pair<uint64_t, uint64_t>>& unassigned = {});
};

/// Counts of one batch for the loss normaliser and bits-per-byte.
struct RowCounts {
  int64_t target_tokens = 0;
  int64_t target_bytes = 0;
  int64_t target_chars = 0;
};

/// Fills one row from window `w` [len] (len <= T + 1) of token type Tok
/// (uint16_t or int32_t). `doc` may be nullptr (cross-document attention
/// allowed). `mask_eos`: the target after each `eos` input is -1 (ignored).
/// Adds the row's targets (those != -1) to `counts`.
template <class Tok>
void fill_row(const Tok* w, size_t len, int32_t seq, int32_t pad, int32_t eos, bool mask_eos,
              const TokenLengths& lengths, int32_t* input, int32_t* target, int32_t* doc, RowCounts& counts) {
  size_t n = len > 0 ? len - 1 : 0;  // positions with a target from the window
  const uint32_t* len_of = lengths.packed.data();
  int64_t bytes = 0, chars = 0, masked = 0;
  for (size_t j = 0; j < n; ++j) {
    int32_t in = static_cast<int32_t>(w[j]);
    int32_t t = static_cast<int32_t>(w[j + 1]);
    input[j] = in;
    if (mask_eos && in == eos) {
      target[j] = -1;
      ++masked;
      continue;
    }
    target[j] = t;
    uint32_t l = len_of[t];
    bytes += l & 0xFFFFu;
    chars += l >> 16;
  }
  // A 1-token tail window keeps its token as an input with no target, so
  // that every token of the stream still appears in exactly one row.
  size_t filled = n;
  if (len == 1) {
    input[0] = static_cast<int32_t>(w[0]);
    target[0] = -1;
    filled = 1;
  }
  for (size_t j = filled; j < static_cast<size_t>(seq); ++j) {
    input[j] = pad;
    target[j] = -1;
  }
  if (doc) {
    int32_t d = 0;
    for (size_t j = 0; j < filled; ++j) {
      doc[j] = d;
      if (input[j] == eos) ++d;
    }
    for (size_t j = filled; j < static_cast<size_t>(seq); ++j) doc[j] = d + (filled > 0 ? 1 : 0);
  }
  counts.target_tokens += static_cast<int64_t>(n) - masked;
  counts.target_bytes += bytes;
  counts.target_chars += chars;
}

}  // namespace zcode::data
