// zcode/sdk/buffers.h: the caller's side of the ABI's growable buffers
// (zc_bytes, zc_ids) backed by a std::string / std::vector<int32_t>, for code
// that calls a tokenizer table directly (the host's tokenize and generate).
#pragma once

#include <zcode/abi.h>

#include <cstdint>
#include <string>
#include <vector>

namespace zcode::sdk {

namespace detail {
inline char* grow_string(zc_bytes* self, size_t extra) {
  auto* s = static_cast<std::string*>(self->ctx);
  s->resize(self->size + extra);
  self->data = s->data();
  self->capacity = s->size();
  return s->data() + self->size;
}
inline int32_t* grow_vector(zc_ids* self, size_t extra) {
  auto* v = static_cast<std::vector<int32_t>*>(self->ctx);
  v->resize(self->size + extra);
  self->data = v->data();
  self->capacity = v->size();
  return v->data() + self->size;
}
}  // namespace detail

/// An empty zc_bytes that appends into `s`; after the call, s.resize(b.size)
/// trims it to what was written.
inline zc_bytes bytes_into(std::string& s) { return zc_bytes{nullptr, 0, 0, &s, &detail::grow_string}; }
/// An empty zc_ids that appends into `v`; after the call, v.resize(ids.size).
inline zc_ids ids_into(std::vector<int32_t>& v) { return zc_ids{nullptr, 0, 0, &v, &detail::grow_vector}; }

}  // namespace zcode::sdk
