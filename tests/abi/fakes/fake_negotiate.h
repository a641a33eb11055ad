// The negotiation of a fake plugin that pretends to be built for ABI
// 1.`minor`: it reports that minor whatever this header's is, so the host
// treats its tables as an older plugin's (fake_model.cpp, fake_optimizer.cpp).
#pragma once

#include <zcode/sdk/plugin.h>

#include <cstdint>

namespace zcode_test {

inline zc_status_code fake_negotiate(uint32_t minor, const zc_manifest* manifest, uint32_t host_major,
                                     const zc_host_services* s, uint32_t* out_major, uint32_t* out_minor,
                                     const zc_manifest** out_manifest) {
  *out_major = ZC_ABI_VERSION_MAJOR;
  *out_minor = minor;
  *out_manifest = manifest;
  if (host_major != ZC_ABI_VERSION_MAJOR) return ZC_ERR_VERSION;
  zcode::sdk::detail::g_host = s;
  return ZC_OK;
}

}  // namespace zcode_test
