#include "packer.h"

#include <zcode/sdk/buffers.h>

#include <algorithm>
#include <string>

namespace zcode::data {

TokenLengths TokenLengths::build(const sdk::TokenizerRef& tok, uint64_t vocab, const std::vector<int32_t>& specials,
                                 const std::vector<std::pair<uint64_t, uint64_t>>& unassigned) {
  TokenLengths L;
  L.packed.assign(vocab, 0);
  std::string storage;  // reused for every id: out.size = 0 restarts it
  zc_bytes out = sdk::bytes_into(storage);
  std::vector<bool> skip(vocab, false);
  for (int32_t s : specials)
    if (s >= 0 && static_cast<uint64_t>(s) < vocab) skip[s] = true;
  for (auto [lo, hi] : unassigned)
    for (uint64_t id = lo; id < std::min(hi, vocab); ++id)
      if (!skip[id]) {
        skip[id] = true;
        ++L.unassigned;
      }
  for (uint64_t id = 0; id < vocab; ++id) {
    if (skip[id]) continue;
    out.size = 0;
    int32_t i = static_cast<int32_t>(id);
    try {
      tok.decode(&i, 1, &out);
    } catch (const sdk::StatusError& e) {
      // An id inside [0, vocab) that no token has (a vocabulary trained with
      // marker version 1 leaves ids between the learned pieces and the
      // guide's special ids): no text, so it never occurs in encoded data.
      if (e.code() != ZC_ERR_INVALID_ARGUMENT) throw;
      ++L.unassigned;
      continue;
    }
    uint32_t chars = 0;
    for (size_t k = 0; k < out.size; ++k) chars += (static_cast<unsigned char>(out.data[k]) & 0xC0) != 0x80;
    if (out.size > 0xFFFF)
      throw sdk::Error(ZC_ERR_UNSUPPORTED, "data: token " + std::to_string(id) + " decodes to " +
                                               std::to_string(out.size) + " bytes; the length table holds < 65536");
    L.packed[id] = static_cast<uint32_t>(out.size) | (chars << 16);
  }
  return L;
}

}  // namespace zcode::data
