// WordNet database reader (see wordnet.h). File formats: wndb(5WN).
//   index.<pos>: lemma pos synset_cnt p_cnt [ptr_symbol...] sense_cnt tagsense_cnt synset_offset...
//   data.<pos>, at byte offset synset_offset: offset lex_filenum ss_type w_cnt(hex) word lex_id ... ;
//     an adjective's word may carry a syntactic marker "(a)", "(p)" or "(ip)", not part of the name.
//   <pos>.exc: inflected_form base_form...
// Lines starting with two spaces are the license header.
#include <zcode/textmetrics/wordnet.h>

#include <algorithm>
#include <sstream>
#include <stdexcept>
#include <utility>

namespace zcode::textmetrics {

namespace {

constexpr const char* kPos[4] = {"noun", "verb", "adj", "adv"};

const std::vector<std::pair<std::string, std::string>>& rules(int p) {
  static const std::vector<std::pair<std::string, std::string>> kRules[4] = {
      {{"s", ""},
       {"ses", "s"},
       {"ves", "f"},
       {"xes", "x"},
       {"zes", "z"},
       {"ches", "ch"},
       {"shes", "sh"},
       {"men", "man"},
       {"ies", "y"}},
      {{"s", ""}, {"ies", "y"}, {"es", "e"}, {"es", ""}, {"ed", "e"}, {"ed", ""}, {"ing", "e"}, {"ing", ""}},
      {{"er", ""}, {"est", ""}, {"er", "e"}, {"est", "e"}},
      {}};
  return kRules[p];
}

}  // namespace

WordNet::WordNet(const std::string& dir) : dir_(dir) {
  for (int p = 0; p < 4; ++p) {
    const std::string idx = dir + "/index." + kPos[p];
    std::ifstream in(idx);
    if (!in) throw std::runtime_error(idx + ": cannot open (WordNet: install wordnet-base, or give its folder)");
    for (std::string line; std::getline(in, line);) {
      if (line.empty() || line[0] == ' ') continue;
      std::istringstream ls(line);
      std::string lemma, pos;
      int synset_cnt = 0, p_cnt = 0;
      if (!(ls >> lemma >> pos >> synset_cnt >> p_cnt)) throw std::runtime_error(idx + ": malformed line: " + line);
      std::string skip;
      for (int i = 0; i < p_cnt; ++i) ls >> skip;
      int sense_cnt = 0, tagsense_cnt = 0;
      ls >> sense_cnt >> tagsense_cnt;
      std::vector<uint64_t>& offs = index_[static_cast<size_t>(p)][lemma];
      for (uint64_t o; ls >> o;) offs.push_back(o);
      if (static_cast<int>(offs.size()) != synset_cnt) throw std::runtime_error(idx + ": malformed line: " + line);
    }
    const std::string exc = dir + "/" + kPos[p] + ".exc";
    std::ifstream ex(exc);
    if (!ex) throw std::runtime_error(exc + ": cannot open");
    for (std::string line; std::getline(ex, line);) {
      std::istringstream ls(line);
      std::string form;
      if (!(ls >> form)) continue;
      auto& bases = exceptions_[static_cast<size_t>(p)][form];
      for (std::string b; ls >> b;) bases.push_back(b);
    }
    const std::string data = dir + "/data." + kPos[p];
    data_[static_cast<size_t>(p)].open(data, std::ios::binary);
    if (!data_[static_cast<size_t>(p)]) throw std::runtime_error(data + ": cannot open");
  }
}

std::vector<std::string> WordNet::morphy(const std::string& word, int p) const {
  const auto& index = index_[static_cast<size_t>(p)];
  auto keep_known = [&](const std::vector<std::string>& forms) {
    std::vector<std::string> out;
    for (const auto& f : forms)
      if (index.count(f) && std::find(out.begin(), out.end(), f) == out.end()) out.push_back(f);
    return out;
  };
  auto apply = [&](const std::vector<std::string>& forms) {
    std::vector<std::string> out;
    for (const auto& f : forms)
      for (const auto& [old, repl] : rules(p))
        if (f.size() >= old.size() && f.ends_with(old)) out.push_back(f.substr(0, f.size() - old.size()) + repl);
    return out;
  };
  const auto& exc = exceptions_[static_cast<size_t>(p)];
  if (auto it = exc.find(word); it != exc.end()) {
    std::vector<std::string> forms{word};
    forms.insert(forms.end(), it->second.begin(), it->second.end());
    return keep_known(forms);
  }
  std::vector<std::string> forms = apply({word});
  std::vector<std::string> first{word};
  first.insert(first.end(), forms.begin(), forms.end());
  if (auto r = keep_known(first); !r.empty()) return r;
  while (!forms.empty()) {
    forms = apply(forms);
    if (auto r = keep_known(forms); !r.empty()) return r;
  }
  return {};
}

std::set<std::string> WordNet::synonyms(const std::string& word) {
  if (auto it = cache_.find(word); it != cache_.end()) return it->second;
  std::set<std::string> out{word};
  for (int p = 0; p < 4; ++p)
    for (const std::string& form : morphy(word, p)) {
      const auto it = index_[static_cast<size_t>(p)].find(form);
      if (it == index_[static_cast<size_t>(p)].end()) continue;
      for (uint64_t off : it->second) {
        std::ifstream& d = data_[static_cast<size_t>(p)];
        d.clear();
        d.seekg(static_cast<std::streamoff>(off));
        std::string line;
        std::getline(d, line);
        std::istringstream ls(line);
        std::string offset, lexfile, type, count;
        if (!(ls >> offset >> lexfile >> type >> count))
          throw std::runtime_error(dir_ + "/data." + kPos[p] + ": no synset at offset " + std::to_string(off));
        const unsigned long n = std::stoul(count, nullptr, 16);
        for (unsigned long i = 0; i < n; ++i) {
          std::string name, lex_id;
          ls >> name >> lex_id;
          if (const size_t paren = name.find('('); paren != std::string::npos && name.back() == ')')
            name.resize(paren);  // "(a)", "(p)", "(ip)": a syntactic marker
          if (name.find('_') == std::string::npos) out.insert(name);
        }
      }
    }
  cache_.emplace(word, out);
  return out;
}

}  // namespace zcode::textmetrics
