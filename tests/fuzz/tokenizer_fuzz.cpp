// libFuzzer target: loading tokenizer files and encoding arbitrary bytes.
// Input byte 0 selects the mode:
//   0: the rest is a tokenizer.json; load it, encode a fixed text with it
//   1: the rest is "vocab.json\0merges.txt"; load (GPT-2 format), encode
//   2: the rest is text; encode with a small byte-level model, check the round trip
//   3: the rest is text; NFC/NFD and the GPT-2 split (pieces must tile the input)
// Load errors must be zcode::sdk::Error (a clear message); anything else is a finding.
//
// Speed: modes 2 and 3 reuse one model built once; modes 0 and 1 build a model
// from the input, with a small shared word cache (kFuzzCacheWords) instead of
// the 8 MiB default, whose allocation dominated each run (57 exec/s, now
// several thousand).
#include "bpe_model.h"
#include "pretokenizer.h"
#include "unicode.h"

#include <zcode/sdk/error.h>

#include <cstdlib>
#include <string>

using namespace zcode::tok;

namespace {

constexpr size_t kFuzzCacheWords = 64;

// A byte-level model: the 256 GPT-2 byte characters plus a few merges.
std::shared_ptr<const BpeModel> small_model() {
  static std::shared_ptr<const BpeModel> m = [] {
    std::string vocab = "{";
    int id = 0;
    auto add = [&](const std::string& t) {
      std::string esc;
      for (char c : t) {
        if (c == '"' || c == '\\') esc += '\\';
        esc += c;
      }
      if (id) vocab += ",";
      vocab += "\"" + esc + "\":" + std::to_string(id);
      ++id;
    };
    char32_t next = 256;
    for (int b = 0; b < 256; ++b) {
      bool printable = (b >= '!' && b <= '~') || (b >= 0xA1 && b <= 0xAC) || (b >= 0xAE && b <= 0xFF);
      std::string s;
      utf8_append(s, printable ? static_cast<char32_t>(b) : next++);
      add(s);
    }
    for (const char* t : {"th", "the", "\xC4\xA0t", "in", "er", "\xC4\xA0\xC4\xA0"}) add(t);
    vocab += "}";
    std::string merges = "#version: 0.2\nt h\nth e\n\xC4\xA0 t\ni n\ne r\n\xC4\xA0 \xC4\xA0\n";
    return BpeModel::parse_gpt2(vocab, merges, "fuzz-vocab.json", "fuzz-merges.txt", kFuzzCacheWords);
  }();
  return m;
}

void encode_some(const std::shared_ptr<const BpeModel>& m) {
  BpeEncoder enc(m, 64);
  std::vector<int32_t> ids;
  enc.encode("Hello world, it's 2024! \xE4\xBD\xA0\xE5\xA5\xBD \xFF", ids);
  std::string out;
  for (int32_t id : ids)
    if (id < 0 || static_cast<size_t>(id) >= m->size()) std::abort();
  m->decode(ids.data(), ids.size(), out);
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  if (size == 0) return 0;
  std::string_view rest(reinterpret_cast<const char*>(data) + 1, size - 1);
  try {
    switch (data[0] % 4) {
      case 0: encode_some(BpeModel::parse_hf_json(rest, "fuzz.json", kFuzzCacheWords)); break;
      case 1: {
        size_t z = rest.find('\0');
        if (z == std::string_view::npos) return 0;
        encode_some(
            BpeModel::parse_gpt2(rest.substr(0, z), rest.substr(z + 1), "vocab.json", "merges.txt", kFuzzCacheWords));
        break;
      }
      case 2: {
        BpeEncoder enc(small_model(), 64);
        std::vector<int32_t> ids;
        enc.encode(rest, ids);
        std::string back;
        small_model()->decode(ids.data(), ids.size(), back);
        if (back != rest) std::abort();  // byte-level BPE must be lossless
        break;
      }
      case 3: {
        std::string a = nfc(rest), b = nfd(rest);
        if (nfc(a) != a || nfd(b) != b) std::abort();  // normal forms are idempotent
        size_t covered = 0;
        gpt2_split(rest, [&](size_t off, size_t len) {
          if (off != covered || len == 0) std::abort();
          covered += len;
        });
        if (covered != rest.size()) std::abort();
        break;
      }
    }
  } catch (const zcode::sdk::Error&) {
    // a clear load error is the expected outcome for most inputs
  }
  return 0;
}
