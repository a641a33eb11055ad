// A reader of the WordNet 3.0 database files (Debian's wordnet-base:
// /usr/share/wordnet) for METEOR's synonym stage: the synonyms of a word are
// the single-word lemma names of every synset of every base form WordNet's
// morphy finds for it, in each part of speech (noun, verb, adjective,
// adverb), as NLTK's wordnet.synsets(word) and lemma.name() give them.
//
// morphy (WordNet's morphy(7WN)): a form listed in <pos>.exc gives itself
// and its listed base forms; otherwise the form and the results of the
// detachment rules applied once, and failing those, the rules applied again
// and again; of these, the forms that index.<pos> lists for that part of
// speech. Rules: noun s, ses>s, ves>f, xes>x, zes>z, ches>ch, shes>sh,
// men>man, ies>y; verb s, ies>y, es>e, es, ed>e, ed, ing>e, ing; adjective
// er, est, er>e, est>e.
#pragma once

#include <array>
#include <cstdint>
#include <fstream>
#include <memory>
#include <set>
#include <string>
#include <unordered_map>
#include <vector>

namespace zcode::textmetrics {

class WordNet {
 public:
  /// Loads index.{noun,verb,adj,adv} and {noun,verb,adj,adv}.exc from `dir`
  /// and opens data.*. Throws std::runtime_error naming the file that is
  /// missing or malformed.
  explicit WordNet(const std::string& dir = "/usr/share/wordnet");
  /// The single-word lemma names (case as in WordNet) of every synset of
  /// every morphy base form of `word` (lower case), plus `word` itself.
  std::set<std::string> synonyms(const std::string& word);
  /// morphy's base forms of `word` in part of speech p (0 noun, 1 verb, 2 adj, 3 adv).
  std::vector<std::string> morphy(const std::string& word, int p) const;

 private:
  std::string dir_;
  std::array<std::unordered_map<std::string, std::vector<uint64_t>>, 4> index_;  // lemma -> synset offsets
  std::array<std::unordered_map<std::string, std::vector<std::string>>, 4> exceptions_;
  std::array<std::ifstream, 4> data_;
  std::unordered_map<std::string, std::set<std::string>> cache_;
};

}  // namespace zcode::textmetrics
