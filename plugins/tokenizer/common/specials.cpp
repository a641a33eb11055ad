// specials.cpp: GLM-5.2 special tokens (guide section 3.2) on top of a loaded
// vocabulary, and special-token parsing in text.
#include "tokenizer_common.h"

#include <zcode/sdk/error.h>

#include <algorithm>
#include <map>
#include <set>

namespace zcode::tok {
namespace {

using sdk::Error;

// Tokens of well-known pretrained vocabularies that play a GLM special's role.
const std::vector<std::string>& aliases_of(const std::string& glm) {
  static const std::map<std::string, std::vector<std::string>> m = {
      {"<pad>", {"<pad>", "[PAD]", "<|padding|>", "<|pad|>"}},
      {"<bos>", {"<bos>", "<s>", "<|begin_of_text|>", "<|endoftext|>", "[CLS]"}},
      {"<eos>", {"<eos>", "</s>", "<|end_of_text|>", "<|endoftext|>", "[SEP]"}},
      {"<mask>", {"<mask>", "[MASK]"}},
  };
  static const std::vector<std::string> none;
  auto it = m.find(glm);
  return it == m.end() ? none : it->second;
}

bool is_space(unsigned char c) { return c == ' ' || c == '\t' || c == '\n' || c == '\r' || c == '\f' || c == '\v'; }
bool is_word(unsigned char c) {
  return c >= 0x80 || (c >= '0' && c <= '9') || (c >= 'A' && c <= 'Z') || (c >= 'a' && c <= 'z') || c == '_';
}

}  // namespace

Specials::Specials(const sdk::Options& options, const sdk::Options& config, size_t base_size,
                   const std::function<int32_t(std::string_view)>& lookup, int trained,
                   std::vector<FileToken> file_tokens)
    : base_size_(base_size), file_(std::move(file_tokens)) {
  // Expert count from the model section (0 when the config has none, e.g. the CLI).
  int64_t experts = config.object("model").get<int64_t>("moe_experts", 0);
  if (experts < 0 || experts > 100000)
    sdk::invalid_argument("model.moe_experts: expected 0..100000 for the <expert_i> tokens, found " +
                          std::to_string(experts));
  std::vector<std::pair<std::string, int64_t>> guide = {{"<pad>", 0}, {"<bos>", 1}, {"<eos>", 2}, {"<mask>", 3}};
  for (int64_t i = 0; i < experts; ++i) guide.push_back({"<expert_" + std::to_string(i) + ">", 1000 + i});
  guide.push_back({"<image>", 250000});

  // Overrides first: they reserve their ids.
  std::map<std::string, int32_t> assigned;
  std::map<int32_t, std::string> by_override;
  const sdk::Options over = options.object("special_tokens");
  std::vector<std::string> over_names;
  for (auto it = over.json().MemberBegin(); it != over.json().MemberEnd(); ++it) {
    std::string name(it->name.GetString(), it->name.GetStringLength());
    int64_t id = over.get<int64_t>(name, -1);
    if (id < 0 || id > 0x7FFFFFF)
      sdk::invalid_argument(over.path(name) + ": expected a token id 0..134217727, found " + std::to_string(id));
    auto clash = by_override.find(static_cast<int32_t>(id));
    if (clash != by_override.end())
      sdk::invalid_argument(over.path(name) + ": id " + std::to_string(id) + " is already given to \"" + clash->second +
                            "\"");
    by_override[static_cast<int32_t>(id)] = name;
    assigned[name] = static_cast<int32_t>(id);
    over_names.push_back(name);
  }
  std::set<int64_t> taken;
  for (auto& [n, id] : assigned)
    if (static_cast<size_t>(id) >= base_size) taken.insert(id);
  int64_t next_free = static_cast<int64_t>(base_size);
  auto append = [&]() {
    while (taken.count(next_free)) ++next_free;
    taken.insert(next_free);
    return static_cast<int32_t>(next_free++);
  };
  for (auto& [name, guide_id] : guide) {
    int32_t id = -1;
    auto o = assigned.find(name);
    if (o != assigned.end()) {
      id = o->second;
    } else if ((id = lookup(name)) >= 0) {
      // present under its own name (e.g. a vocabulary ZCode trained)
    } else if (trained == 1 && static_cast<size_t>(guide_id) >= base_size && !taken.count(guide_id)) {
      // The guide's id, free in a vocabulary trained before marker version 2
      // (kept so its tokenizers and checkpoints keep their ids).
      id = static_cast<int32_t>(guide_id);
      taken.insert(guide_id);
    } else {
      if (!trained) {
        for (const std::string& a : aliases_of(name)) {
          if ((id = lookup(a)) >= 0) {
            aliases_.push_back({name, a});
            break;
          }
        }
      }
      if (id < 0) id = append();
    }
    glm_.push_back({name, id});
    if (name == "<pad>") pad_ = id;
    if (name == "<bos>") bos_ = id;
    if (name == "<eos>") eos_ = id;
    if (name == "<mask>") mask_ = id;
  }
  // Overrides that name other specials (not GLM ones) become specials too.
  for (const std::string& name : over_names) {
    bool glm = std::any_of(glm_.begin(), glm_.end(), [&](auto& g) { return g.first == name; });
    if (!glm) file_.push_back(FileToken{name, assigned[name], true, false, false, false});
  }

  // Texts of ids outside the base vocabulary.
  uint64_t max_id = base_size ? base_size - 1 : 0;
  for (auto& [n, id] : glm_) {
    if (static_cast<size_t>(id) >= base_size) extra_.push_back({id, n});
    max_id = std::max<uint64_t>(max_id, static_cast<uint64_t>(id));
  }
  for (auto& f : file_) {
    if (static_cast<size_t>(f.id) >= base_size && !extra_text(f.id)) extra_.push_back({f.id, f.text});
    max_id = std::max<uint64_t>(max_id, static_cast<uint64_t>(f.id));
  }
  std::sort(extra_.begin(), extra_.end());
  extra_.erase(std::unique(extra_.begin(), extra_.end(), [](auto& a, auto& b) { return a.first == b.first; }),
               extra_.end());
  vocab_size_ = (base_size || !glm_.empty()) ? max_id + 1 : 0;

  // allowed_special: "all", "none" (default) or a list of special texts.
  std::set<std::string> allowed;
  bool allow_all = false;
  const rapidjson::Value& oj = options.json();
  auto ait = oj.FindMember("allowed_special");
  if (ait != oj.MemberEnd() && !ait->value.IsNull()) {
    if (ait->value.IsString()) {
      std::string v = ait->value.GetString();
      if (v == "all") allow_all = true;
      else if (v != "none")
        sdk::invalid_argument(options.path("allowed_special") +
                              ": expected \"all\", \"none\" or a list of special tokens, found \"" + v + "\"");
    } else {
      for (const std::string& s : options.get_list<std::string>("allowed_special", {})) allowed.insert(s);
    }
  }
  auto add_matcher = [&](const std::string& text, int32_t id, bool always, const FileToken* f) {
    if (text.empty()) return;
    for (auto& m : matchers_)
      if (m.text == text) return;
    bool ok = always || allow_all || allowed.count(text);
    matchers_.push_back(Matcher{text, id, ok, f && f->lstrip, f && f->rstrip, f && f->single_word});
    first_byte_[static_cast<unsigned char>(text[0])] = true;
    if (ok) any_default_ = true;
  };
  for (auto& f : file_) add_matcher(f.text, f.id, !f.special, &f);
  for (auto& [n, id] : glm_) add_matcher(n, id, false, nullptr);
  for (const std::string& s : allowed) {
    if (special_id(s) < 0) {
      std::string known;
      for (auto& m : matchers_) {
        if (!known.empty()) known += ", ";
        known += m.text;
      }
      sdk::invalid_argument(options.path("allowed_special") + ": \"" + s +
                            "\" is not a special token of this tokenizer (known: " + known.substr(0, 300) + ")");
    }
  }
  std::stable_sort(matchers_.begin(), matchers_.end(),
                   [](const Matcher& a, const Matcher& b) { return a.text.size() > b.text.size(); });
}

const std::string* Specials::extra_text(int32_t id) const {
  auto it = std::lower_bound(extra_.begin(), extra_.end(), id, [](const auto& e, int32_t v) { return e.first < v; });
  return (it != extra_.end() && it->first == id) ? &it->second : nullptr;
}

int32_t Specials::special_id(std::string_view text) const {
  for (auto& m : matchers_)
    if (m.text == text) return m.id;
  return -1;
}

void Specials::split(std::string_view text, bool allow_all, const std::function<void(std::string_view, bool)>& plain,
                     const std::function<void(int32_t)>& special) const {
  if (!may_match(allow_all)) {
    plain(text, true);
    return;
  }
  const auto* s = reinterpret_cast<const unsigned char*>(text.data());
  const size_t n = text.size();
  size_t seg = 0;
  for (size_t i = 0; i < n;) {
    const Matcher* hit = nullptr;
    if (first_byte_[s[i]]) {
      for (const Matcher& m : matchers_) {
        if (!(m.allowed || allow_all) || m.text.size() > n - i || text.compare(i, m.text.size(), m.text) != 0) continue;
        if (m.single_word && ((i > 0 && is_word(s[i - 1])) || (i + m.text.size() < n && is_word(s[i + m.text.size()]))))
          continue;
        hit = &m;
        break;
      }
    }
    if (!hit) {
      ++i;
      continue;
    }
    size_t start = i, end = i + hit->text.size();
    if (hit->lstrip)
      while (start > seg && is_space(s[start - 1])) --start;
    if (hit->rstrip)
      while (end < n && is_space(s[end])) ++end;
    if (start > seg) plain(text.substr(seg, start - seg), seg == 0);
    special(hit->id);
    seg = i = end;
  }
  if (seg < n) plain(text.substr(seg), seg == 0);
}

void Specials::write_members(sdk::json::Writer& w) const {
  w.key("specials").begin_object();
  for (auto& [n, id] : glm_) w.key(n).integer(id);
  for (auto& f : file_)
    if (f.special && std::none_of(glm_.begin(), glm_.end(), [&](auto& g) { return g.first == f.text; }))
      w.key(f.text).integer(f.id);
  w.end_object();
  w.key("pad_id").integer(pad_).key("bos_id").integer(bos_).key("eos_id").integer(eos_).key("mask_id").integer(mask_);
  w.key("special_aliases").begin_object();
  for (auto& [g, a] : aliases_) w.key(g).string(a);
  w.end_object();
  // Ids of [0, vocab_size) that no token has, as half-open [first, end)
  // ranges: the data loader skips them instead of decoding each one.
  w.key("unassigned_ids").begin_array();
  uint64_t next = base_size_;
  auto gap = [&](uint64_t lo, uint64_t hi) {
    if (lo < hi) w.begin_array().integer(lo).integer(hi).end_array();
  };
  for (auto& [id, text] : extra_) {
    gap(next, static_cast<uint64_t>(id));
    next = static_cast<uint64_t>(id) + 1;
  }
  gap(next, vocab_size_);
  w.end_array();
}

}  // namespace zcode::tok
