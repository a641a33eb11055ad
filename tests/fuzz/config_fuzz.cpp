// libFuzzer target: the config loader (YAML through yaml-cpp, JSON through
// RapidJSON, both into one tree) and the validator that walks that tree.
// Debian's yaml-cpp is not instrumented, so coverage guides our own code: the
// YAML-to-tree walk with its depth and alias bounds, scalar typing, the JSON
// duplicate check and every validation rule.
//
// Input: the config text (JSON when it starts with '{', else YAML, as
// HarnessConfig::from_string decides), whole, so the guide's configs seed
// it as they are. Properties:
//   - loading throws only ConfigLoadError; check() never throws;
//   - a config that validates round-trips: from_string(to_yaml()) validates
//     again and gives the same to_json() (config.h promises it for the run
//     folder's config.yaml).
// Anything else (a crash, a hang, another exception) is a finding.
//
// Speed: one yaml-cpp Load costs about 100 us and check() about 300 us (it
// builds the schema validator), so the whole chain (two loads, two
// validations, an emit) would run at about 100 inputs per second. Inputs
// whose length is a multiple of 4 get the whole chain; the others only the
// load, which is where untrusted structure is walked. Mutations change the
// length freely, so every input reaches both.
#include <zcode/core/config.h>

#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <string>
#include <string_view>

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const std::string_view text(reinterpret_cast<const char*>(data), size);
  zcode::HarnessConfig cfg;
  try {
    cfg = zcode::HarnessConfig::from_string(text, "fuzz.yaml");
  } catch (const zcode::ConfigLoadError&) {
    return 0;  // a clear load error is the expected outcome for most inputs
  }
  if (size % 4 != 0) return 0;
  if (!cfg.check(nullptr).empty()) return 0;
  try {
    cfg.validate(nullptr);
  } catch (const zcode::ConfigValidationError& e) {
    std::fprintf(stderr, "check() found no error but validate() threw:\n%s\n", e.what());
    std::abort();
  }
  const std::string yaml = cfg.to_yaml();
  try {
    zcode::HarnessConfig again = zcode::HarnessConfig::from_string(yaml, "roundtrip.yaml");
    again.validate(nullptr);
    if (again.to_json() != cfg.to_json()) {
      std::fprintf(stderr, "round trip changed the config:\n%s\n---\n%s\n", cfg.to_json().c_str(),
                   again.to_json().c_str());
      std::abort();
    }
  } catch (const std::exception& e) {
    std::fprintf(stderr, "to_yaml() output does not load back: %s\n---\n%s\n", e.what(), yaml.c_str());
    std::abort();
  }
  return 0;
}
