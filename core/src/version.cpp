// Build facts for --version (from the generated zcode/core/build_info.h).
#include <zcode/core/version.h>

#include <zcode/abi.h>
#include <zcode/core/build_info.h>

#include <sstream>

namespace zcode {

const char* version_string() { return ZCODE_VERSION_STRING; }
// git_commit(): generated at build time (cmake/git_commit.cmake).

std::string version_text() {
  std::ostringstream o;
  auto dep = [&](const char* name, const char* v) { o << "  " << name << " " << (*v ? v : "(unknown)") << "\n"; };
  o << "zcode-host " << ZCODE_VERSION_STRING << "\n";
  o << "plugin ABI " << ZC_ABI_VERSION_MAJOR << "." << ZC_ABI_VERSION_MINOR << "\n";
  o << "git commit " << git_commit() << "\n";
  o << "build type " << ZCODE_BUILD_TYPE << (ZCODE_SANITIZE_BUILD ? " (asan+ubsan)" : "") << ", " << ZCODE_CXX_COMPILER
    << "\n";
  o << "backends: cpu (fp32, OpenBLAS)";
  if (ZCODE_HAVE_CUDA_TOOLKIT) o << "; CUDA toolkit found at build time, but the CUDA kernels are not implemented yet";
  else o << "; cuda: no CUDA toolkit found at build time (the CUDA kernels are not implemented yet)";
  o << "\n";
  o << "dependencies:\n";
  dep("boost", ZCODE_BOOST_VERSION);
  dep("yaml-cpp", ZCODE_YAML_CPP_VERSION);
  dep("rapidjson", ZCODE_RAPIDJSON_VERSION);
  dep("openblas", ZCODE_OPENBLAS_VERSION);
  dep("sentencepiece", ZCODE_SENTENCEPIECE_VERSION);
  dep("zstd", ZCODE_ZSTD_VERSION);
  dep("openssl", ZCODE_OPENSSL_VERSION);
  dep("dlpack", std::to_string(DLPACK_VERSION).c_str());
  return o.str();
}

}  // namespace zcode
