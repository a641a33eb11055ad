// The bpe core's Unicode layer against the Unicode Consortium's own test data:
// NormalizationTest.txt (UAX #15 conformance file, Debian's unicode-data) for
// NFC/NFD, and UnicodeData.txt general categories for the pre-tokenizer classes.
#include "unicode.h"
#include "pretokenizer.h"

#include <gtest/gtest.h>

#include <cstdio>
#include <fstream>
#include <sstream>

namespace {

using namespace zcode::tok;

std::string utf8_of_hex(const std::string& field) {
  std::istringstream in(field);
  std::string out, hex;
  while (in >> hex) utf8_append(out, static_cast<char32_t>(std::stoul(hex, nullptr, 16)));
  return out;
}

TEST(Unicode, NormalizationConformance) {
  const char* path = "/usr/share/unicode/NormalizationTest.txt.bz2";
  if (!std::ifstream(path).good())
    GTEST_SKIP() << path << " is missing: run scripts/install-deps.sh (package unicode-data)";
  FILE* p = ::popen((std::string("bzcat ") + path).c_str(), "r");
  ASSERT_NE(p, nullptr);
  char buf[4096];
  size_t lines = 0, failures = 0;
  while (std::fgets(buf, sizeof buf, p)) {
    std::string line(buf);
    if (line.empty() || line[0] == '#' || line[0] == '@') continue;
    std::vector<std::string> c;
    std::istringstream in(line);
    std::string f;
    while (std::getline(in, f, ';') && c.size() < 5) c.push_back(f);
    if (c.size() < 5) continue;
    ++lines;
    // Conformance (the file's header): c2 == NFC(c1) == NFC(c2) == NFC(c3); c3 == NFD(c1) == NFD(c2) == NFD(c3).
    std::string c1 = utf8_of_hex(c[0]), c2 = utf8_of_hex(c[1]), c3 = utf8_of_hex(c[2]);
    bool ok = nfc(c1) == c2 && nfc(c2) == c2 && nfc(c3) == c2 && nfd(c1) == c3 && nfd(c2) == c3 && nfd(c3) == c3;
    if (!ok && ++failures <= 5) ADD_FAILURE() << "NormalizationTest line: " << line;
  }
  ::pclose(p);
  EXPECT_GT(lines, 15000u);
  EXPECT_EQ(failures, 0u);
}

TEST(Unicode, ClassesFollowGeneralCategory) {
  std::ifstream in("/usr/share/unicode/UnicodeData.txt");
  if (!in)
    GTEST_SKIP() << "/usr/share/unicode/UnicodeData.txt is missing: run scripts/install-deps.sh (package unicode-data)";
  std::string line;
  size_t checked = 0;
  while (std::getline(in, line)) {
    std::istringstream f(line);
    std::string cp_hex, name, cat;
    std::getline(f, cp_hex, ';');
    std::getline(f, name, ';');
    std::getline(f, cat, ';');
    char32_t cp = static_cast<char32_t>(std::stoul(cp_hex, nullptr, 16));
    if (name.find(", Last>") != std::string::npos) continue;
    CharClass want = cat[0] == 'L'   ? kLetter
                     : cat[0] == 'N' ? kNumber
                     : (cat == "Zs" || cp == 0x09 || cp == 0x0A || cp == 0x0B || cp == 0x0C || cp == 0x0D ||
                        cp == 0xFEFF || cp == 0x2028 || cp == 0x2029)
                         ? kSpace
                         : kOther;
    ASSERT_EQ(char_class(cp), want) << "U+" << cp_hex << " " << name << " (" << cat << ")";
    ++checked;
  }
  EXPECT_GT(checked, 30000u);
  EXPECT_EQ(char_class(0x85), kOther);  // NEL is not ECMAScript whitespace
  EXPECT_EQ(char_class(kInvalidCodePoint), kOther);
}

std::vector<std::string> split(const std::string& s) {
  std::vector<std::string> out;
  gpt2_split(s, [&](size_t o, size_t n) { out.push_back(s.substr(o, n)); });
  return out;
}

// Hand-derived from the pattern's alternatives (leftmost wins; \s+(?!\S) backtracks one space).
TEST(Unicode, Gpt2SplitWorkedExamples) {
  EXPECT_EQ(split("Hello world"), (std::vector<std::string>{"Hello", " world"}));
  EXPECT_EQ(split("I'm   here"), (std::vector<std::string>{"I", "'m", "  ", " here"}));
  EXPECT_EQ(split("A'S"), (std::vector<std::string>{"A", "'", "S"}));
  EXPECT_EQ(split("x\n\ny"), (std::vector<std::string>{"x", "\n", "\n", "y"}));
  EXPECT_EQ(split("abc123!? "), (std::vector<std::string>{"abc", "123", "!?", " "}));
  EXPECT_EQ(split(" \t"), (std::vector<std::string>{" \t"}));
  EXPECT_EQ(split("a \xFF\xFE b"), (std::vector<std::string>{"a", " \xFF\xFE", " b"}));
  EXPECT_EQ(split(""), (std::vector<std::string>{}));
}

}  // namespace
