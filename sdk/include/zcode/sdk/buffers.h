// zcode/sdk/buffers.h: the caller's side of the ABI's growable buffers
// (zc_bytes, zc_ids) backed by a std::string / std::vector<int32_t>, for code
// that calls a tokenizer table directly (the host's tokenize and generate,
// the jsonl data loader).
#pragma once

#include <zcode/abi.h>

#include <cstdint>
#include <new>
#include <stdexcept>
#include <string>
#include <vector>

namespace zcode::sdk {

namespace detail {
// The growers are called through the ABI's function pointers, so they must
// not throw (abi.h: NULL on allocation failure): an exception may not unwind
// through a C boundary. On failure the buffer is left as it was.
template <class Buffer, class Container>
inline decltype(Buffer::data) grow(Buffer* self, size_t extra) noexcept {
  auto* c = static_cast<Container*>(self->ctx);
  if (extra > SIZE_MAX - self->size) return nullptr;  // size + extra would wrap
  try {
    c->resize(self->size + extra);
  } catch (const std::bad_alloc&) {
    return nullptr;
  } catch (const std::length_error&) {
    return nullptr;
  }
  self->data = c->data();
  self->capacity = c->size();
  return c->data() + self->size;
}
}  // namespace detail

/// An empty zc_bytes that appends into `s` (which must outlive it); after the
/// call, s.resize(b.size) trims it to what was written. Its reserve never
/// throws: NULL when `s` cannot grow (out of memory, or beyond max_size).
inline zc_bytes bytes_into(std::string& s) { return zc_bytes{nullptr, 0, 0, &s, &detail::grow<zc_bytes, std::string>}; }
/// An empty zc_ids that appends into `v` (which must outlive it); after the
/// call, v.resize(ids.size). Its reserve never throws: NULL when `v` cannot grow.
inline zc_ids ids_into(std::vector<int32_t>& v) {
  return zc_ids{nullptr, 0, 0, &v, &detail::grow<zc_ids, std::vector<int32_t>>};
}

}  // namespace zcode::sdk
