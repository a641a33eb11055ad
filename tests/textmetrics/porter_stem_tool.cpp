// Test helper: the Porter stem of each word read from stdin (one per line),
// one per line on stdout; for meteor_vs_nltk.py's comparison with NLTK.
#include <zcode/textmetrics/porter.h>

#include <iostream>
#include <string>

int main() {
  std::ios::sync_with_stdio(false);
  for (std::string w; std::getline(std::cin, w);) std::cout << zcode::textmetrics::porter_stem(w) << '\n';
  return 0;
}
