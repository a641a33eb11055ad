// libFuzzer: any byte string given to the safetensors Reader either parses or
// throws zcode::sdk::Error; it never reads outside the input (ASan) and every
// view it returns lies inside memory it owns (checked by touching each byte).
#include <zcode/sdk/safetensors.h>

#include <cstddef>
#include <cstdint>

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  try {
    zcode::sdk::safetensors::Reader r(std::span<const uint8_t>(data, size), "fuzz");
    volatile uint8_t sink = 0;
    for (const auto& t : r.tensors()) {
      for (size_t i = 0; i < t.nbytes; ++i) sink = sink ^ t.data[i];
      if (static_cast<size_t>(t.numel()) * zcode::sdk::safetensors::dtype_size(t.dtype) != t.nbytes) __builtin_trap();
      (void)t.dltensor();
    }
    (void)sink;
  } catch (const zcode::sdk::Error&) {
  }
  return 0;
}
