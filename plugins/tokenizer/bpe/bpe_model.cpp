// bpe_model.cpp: loading (GPT-2 files, tokenizer.json) and encoding.
#include "bpe_model.h"

#include "pretokenizer.h"
#include "unicode.h"

#include <zcode/sdk/error.h>
#include <zcode/sdk/json.h>

#include <rapidjson/document.h>
#include <rapidjson/error/en.h>

#include <algorithm>
#include <array>
#include <atomic>
#include <climits>
#include <cstdio>
#include <fstream>
#include <sstream>
#include <thread>

namespace zcode::tok {
namespace {

using sdk::Error;

[[noreturn]] void data_error(const std::string& msg) { throw Error(ZC_ERR_DATA, msg); }
[[noreturn]] void unsupported(const std::string& msg) { throw Error(ZC_ERR_UNSUPPORTED, msg); }

std::string read_file(const std::string& path) {
  std::ifstream f(path, std::ios::binary);
  if (!f) throw Error(ZC_ERR_NOT_FOUND, path + ": cannot open file");
  std::ostringstream ss;
  ss << f.rdbuf();
  if (f.bad()) throw Error(ZC_ERR_IO, path + ": read error");
  return ss.str();
}

// "name:line:col" of a byte offset, for JSON parse errors.
std::string where_at(std::string_view text, size_t offset, const std::string& name) {
  return name + ":" + sdk::json::line_col(text, offset);
}

std::string describe(const rapidjson::Value& v) {
  if (v.IsString()) {
    std::string s(v.GetString(), v.GetStringLength());
    if (s.size() > 40) s = s.substr(0, 37) + "...";
    return "string \"" + s + "\"";
  }
  if (v.IsBool()) return v.GetBool() ? "true" : "false";
  if (v.IsNull()) return "null";
  if (v.IsNumber()) return "number " + std::to_string(v.GetDouble());
  if (v.IsArray()) return "an array";
  return "an object";
}

rapidjson::Document parse_json(std::string_view text, const std::string& name) {
  rapidjson::Document d;
  const sdk::json::Result r = sdk::json::parse<rapidjson::kParseFullPrecisionFlag>(d, text);
  if (r.too_deep) data_error(where_at(text, r.offset, name) + ": " + r.message());
  if (!r.ok()) data_error(where_at(text, r.offset, name) + ": invalid JSON: " + r.message());
  if (!d.IsObject()) data_error(name + ": expected a JSON object at the top level, found " + describe(d));
  return d;
}

// Typed member access with JSON-path errors: `tokenizer.json: model.vocab: expected an object, found ...`.
struct JsonCtx {
  std::string file;
  const rapidjson::Value* get(const rapidjson::Value& obj, const char* key) const {
    auto it = obj.FindMember(key);
    return (it == obj.MemberEnd() || it->value.IsNull()) ? nullptr : &it->value;
  }
  [[noreturn]] void type_error(const std::string& path, const char* expected, const rapidjson::Value& v) const {
    data_error(file + ": " + path + ": expected " + expected + ", found " + describe(v));
  }
  bool boolean(const rapidjson::Value& obj, const char* key, const std::string& path, bool fallback) const {
    const rapidjson::Value* v = get(obj, key);
    if (!v) return fallback;
    if (!v->IsBool()) type_error(path + "." + key, "a boolean", *v);
    return v->GetBool();
  }
  std::string string(const rapidjson::Value& obj, const char* key, const std::string& path,
                     const std::string& fallback) const {
    const rapidjson::Value* v = get(obj, key);
    if (!v) return fallback;
    if (!v->IsString()) type_error(path + "." + key, "a string", *v);
    return std::string(v->GetString(), v->GetStringLength());
  }
  const rapidjson::Value& object(const rapidjson::Value& obj, const char* key, const std::string& path) const {
    const rapidjson::Value* v = get(obj, key);
    if (!v) data_error(file + ": " + path + key + ": missing");
    if (!v->IsObject()) type_error(path + key, "an object", *v);
    return *v;
  }
};

// GPT-2's reversible byte -> printable character map (encoder.py, bytes_to_unicode).
const std::array<char32_t, 256>& byte_alphabet() {
  static const std::array<char32_t, 256> map = [] {
    std::array<char32_t, 256> m{};
    char32_t next = 256;
    for (int b = 0; b < 256; ++b) {
      bool printable = (b >= '!' && b <= '~') || (b >= 0xA1 && b <= 0xAC) || (b >= 0xAE && b <= 0xFF);
      m[static_cast<size_t>(b)] = printable ? static_cast<char32_t>(b) : next++;
    }
    return m;
  }();
  return map;
}

// Inverse of byte_alphabet for decoding: code point -> byte, or -1.
int alphabet_byte(char32_t cp) {
  static const std::array<int16_t, 512> inv = [] {
    std::array<int16_t, 512> m;
    m.fill(-1);
    const auto& a = byte_alphabet();
    for (int b = 0; b < 256; ++b) m[a[static_cast<size_t>(b)]] = static_cast<int16_t>(b);
    return m;
  }();
  return cp < 512 ? inv[cp] : -1;
}

uint64_t pair_key(int32_t a, int32_t b) {
  return ((static_cast<uint64_t>(static_cast<uint32_t>(a)) << 32) | static_cast<uint32_t>(b)) + 1;
}

void replace_all(std::string& s, std::string_view from, std::string_view to) {
  if (from.empty() || s.find(from) == std::string::npos) return;
  std::string out;
  out.reserve(s.size());
  size_t i = 0;
  for (size_t j; (j = s.find(from, i)) != std::string::npos; i = j + from.size()) {
    out.append(s, i, j - i);
    out.append(to);
  }
  out.append(s, i, std::string::npos);
  s.swap(out);
}

// Parses a normalizer or decoder object (possibly a Sequence) into ops.
void parse_ops(const JsonCtx& j, const rapidjson::Value& v, const std::string& path, bool decoder,
               std::vector<TextOp>& ops) {
  if (!v.IsObject()) j.type_error(path, "an object", v);
  std::string type = j.string(v, "type", path, "");
  if (type.empty()) data_error(j.file + ": " + path + ".type: missing");
  auto pattern_string = [&]() {
    const rapidjson::Value* p = j.get(v, "pattern");
    if (!p || !p->IsObject()) data_error(j.file + ": " + path + ".pattern: expected an object {\"String\": ...}");
    if (p->HasMember("Regex"))
      unsupported(j.file + ": " + path + ".pattern: Regex patterns are not supported (only String)");
    return j.string(*p, "String", path + ".pattern", "");
  };
  if (type == "Sequence") {
    const char* key = decoder ? "decoders" : "normalizers";
    const rapidjson::Value* list = j.get(v, key);
    if (!list || !list->IsArray()) data_error(j.file + ": " + path + "." + key + ": expected an array");
    for (rapidjson::SizeType i = 0; i < list->Size(); ++i)
      parse_ops(j, (*list)[i], path + "." + key + "[" + std::to_string(i) + "]", decoder, ops);
    return;
  }
  TextOp op{};
  if (type == "Replace") {
    op.kind = TextOp::kReplace;
    op.a = pattern_string();
    op.b = j.string(v, "content", path, "");
  } else if (!decoder && type == "Prepend") {
    op.kind = TextOp::kPrepend;
    op.a = j.string(v, "prepend", path, "");
  } else if (!decoder && type == "NFC") {
    op.kind = TextOp::kNfc;
  } else if (!decoder && type == "NFD") {
    op.kind = TextOp::kNfd;
  } else if (decoder && type == "Strip") {
    op.kind = TextOp::kStrip;
    op.a = j.string(v, "content", path, " ");
    const rapidjson::Value* s = j.get(v, "start");
    const rapidjson::Value* e = j.get(v, "stop");
    if ((s && !s->IsUint()) || (e && !e->IsUint()))
      data_error(j.file + ": " + path + ": start/stop must be non-negative integers");
    op.start = s ? static_cast<int32_t>(s->GetUint()) : 0;
    op.stop = e ? static_cast<int32_t>(e->GetUint()) : 0;
  } else if (decoder && type == "ByteLevel") {
    op.kind = TextOp::kByteLevel;
  } else if (decoder && type == "ByteFallback") {
    op.kind = TextOp::kByteFallback;
  } else if (decoder && type == "Fuse") {
    op.kind = TextOp::kFuse;
  } else if (decoder && type == "Metaspace") {
    op.kind = TextOp::kMetaspace;
    op.a = j.string(v, "replacement", path, "\xE2\x96\x81");
    std::string scheme =
        j.string(v, "prepend_scheme", path, j.boolean(v, "add_prefix_space", path, true) ? "always" : "never");
    op.start = scheme != "never";
  } else {
    unsupported(j.file + ": " + path + ".type: \"" + type + "\" is not supported (" +
                (decoder ? "decoders: Sequence, Replace, Strip, ByteLevel, ByteFallback, Fuse, Metaspace"
                         : "normalizers: Sequence, Prepend, Replace, NFC, NFD") +
                ")");
  }
  ops.push_back(std::move(op));
}

void parse_pre_tokenizer(const JsonCtx& j, const rapidjson::Value& v, const std::string& path, PreTokenizer& pre) {
  if (!v.IsObject()) j.type_error(path, "an object", v);
  std::string type = j.string(v, "type", path, "");
  if (type == "Sequence") {
    const rapidjson::Value* list = j.get(v, "pretokenizers");
    if (!list || !list->IsArray()) data_error(j.file + ": " + path + ".pretokenizers: expected an array");
    if (list->Size() != 1)
      unsupported(j.file + ": " + path + ": a Sequence of " + std::to_string(list->Size()) +
                  " pre-tokenizers is not supported (only one ByteLevel or Metaspace)");
    parse_pre_tokenizer(j, (*list)[0], path + ".pretokenizers[0]", pre);
  } else if (type == "ByteLevel") {
    pre.kind = PreTokenizer::kByteLevel;
    pre.add_prefix_space = j.boolean(v, "add_prefix_space", path, true);
    pre.use_regex = j.boolean(v, "use_regex", path, true);
  } else if (type == "Metaspace") {
    pre.kind = PreTokenizer::kMetaspace;
    pre.replacement = j.string(v, "replacement", path, "\xE2\x96\x81");
    std::string scheme =
        j.string(v, "prepend_scheme", path, j.boolean(v, "add_prefix_space", path, true) ? "always" : "never");
    if (scheme != "always" && scheme != "first" && scheme != "never")
      data_error(j.file + ": " + path + ".prepend_scheme: expected \"always\", \"first\" or \"never\", found \"" +
                 scheme + "\"");
    pre.prepend = scheme == "never" ? 0 : scheme == "first" ? 1 : 2;
    pre.split = j.boolean(v, "split", path, true);
  } else {
    unsupported(j.file + ": " + path + ".type: \"" + type +
                "\" is not supported (pre-tokenizers: ByteLevel, Metaspace)");
  }
}

}  // namespace

int32_t BpeModel::token_to_id(std::string_view token) const {
  auto it = vocab_.find(token);
  return it == vocab_.end() ? -1 : it->second;
}

std::shared_ptr<const BpeModel> BpeModel::load_gpt2(const std::string& vocab_path, const std::string& merges_path) {
  return parse_gpt2(read_file(vocab_path), read_file(merges_path), vocab_path, merges_path);
}

std::shared_ptr<const BpeModel> BpeModel::load_hf_json(const std::string& path) {
  return parse_hf_json(read_file(path), path);
}

// The id bound of a file with `entries` tokens (vocabulary plus added_tokens):
// see BpeModel::kMaxUnassignedIds. An id at or past it is an error naming the
// entry, the id and the bound, before the dense token table grows to it.
static void check_id_bound(const std::string& where, uint32_t id, size_t entries) {
  size_t bound = entries + BpeModel::kMaxUnassignedIds;
  if (id >= bound)
    data_error(where + ": id " + std::to_string(id) + " is too large: a file of " + std::to_string(entries) +
               " tokens may use ids below " + std::to_string(bound) + " (at most " +
               std::to_string(BpeModel::kMaxUnassignedIds) + " ids without a token)");
}

// Fills tokens_ from vocab_ (ids must be dense enough: holes get "", and the
// largest id is bounded by check_id_bound). Two tokens with one id, or one
// token listed twice, is an error naming both: either would silently make one
// of them unreachable.
static void add_vocab(const JsonCtx& j, const rapidjson::Value& vocab, const std::string& path, size_t entries,
                      std::unordered_map<std::string, int32_t, StringHash, std::equal_to<>>& map,
                      std::vector<std::string>& tokens) {
  auto shown = [](const std::string& t) { return "\"" + t.substr(0, 40) + (t.size() > 40 ? "...\"" : "\""); };
  const std::string where = j.file + ": " + (path.empty() ? "" : path + ": ");
  std::vector<bool> assigned;
  for (auto it = vocab.MemberBegin(); it != vocab.MemberEnd(); ++it) {
    std::string tok(it->name.GetString(), it->name.GetStringLength());
    const std::string entry = path + "[\"" + tok.substr(0, 40) + "\"]";
    if (!it->value.IsUint()) j.type_error(entry, "a token id (an integer from 0)", it->value);
    uint32_t id = it->value.GetUint();
    check_id_bound(j.file + ": " + entry, id, entries);
    if (tokens.size() <= id) tokens.resize(id + 1), assigned.resize(id + 1);
    if (assigned[id])
      data_error(where + "tokens " + shown(tokens[id]) + " and " + shown(tok) + " both have id " + std::to_string(id));
    auto [at, fresh] = map.emplace(tok, static_cast<int32_t>(id));
    if (!fresh)
      data_error(where + "token " + shown(tok) + " is listed twice (ids " + std::to_string(at->second) + " and " +
                 std::to_string(id) + ")");
    tokens[id] = tok;
    assigned[id] = true;
  }
}

std::shared_ptr<const BpeModel> BpeModel::parse_gpt2(std::string_view vocab_json, std::string_view merges,
                                                     const std::string& vocab_name, const std::string& merges_name,
                                                     size_t shared_cache_words) {
  auto m = std::make_shared<BpeModel>();
  m->word_cache_ = std::make_unique<SharedWordCache>(shared_cache_words, shared_cache_words * 64);
  m->format_ = "gpt2";
  JsonCtx j{vocab_name};
  rapidjson::Document d = parse_json(vocab_json, vocab_name);
  add_vocab(j, d, "", d.MemberCount(), m->vocab_, m->tokens_);
  if (m->tokens_.empty()) data_error(vocab_name + ": the vocabulary is empty");
  m->byte_level_ = true;
  m->pre_.kind = PreTokenizer::kByteLevel;
  m->pre_.add_prefix_space = false;
  m->decoder_.push_back(TextOp{TextOp::kByteLevel, {}, {}, 0, 0});
  // Merges: first line may be "#version: ..."; then "left right" per line.
  size_t nlines = static_cast<size_t>(std::count(merges.begin(), merges.end(), '\n')) + 1;
  m->merges_.reserve(nlines);
  int32_t rank = 0;
  size_t line_no = 0;
  for (size_t pos = 0; pos <= merges.size();) {
    size_t eol = merges.find('\n', pos);
    if (eol == std::string_view::npos) eol = merges.size();
    std::string_view line = merges.substr(pos, eol - pos);
    pos = eol + 1;
    ++line_no;
    if (!line.empty() && line.back() == '\r') line.remove_suffix(1);
    if (line.empty() || (line_no == 1 && line.rfind("#version", 0) == 0)) continue;
    size_t sp = line.find(' ');
    if (sp == std::string_view::npos || sp == 0 || sp + 1 >= line.size() ||
        line.find(' ', sp + 1) != std::string_view::npos) {
      std::string shown(line.substr(0, 40));
      data_error(merges_name + ":" + std::to_string(line_no) + ": expected two tokens separated by one space, found '" +
                 shown + "'");
    }
    std::string_view a = line.substr(0, sp), b = line.substr(sp + 1);
    int32_t ia = m->token_to_id(a), ib = m->token_to_id(b);
    std::string ab = std::string(a) + std::string(b);
    int32_t iab = m->token_to_id(ab);
    if (ia < 0 || ib < 0 || iab < 0)
      data_error(merges_name + ":" + std::to_string(line_no) + ": token '" +
                 (ia < 0   ? std::string(a)
                  : ib < 0 ? std::string(b)
                           : ab) +
                 "' is not in " + vocab_name);
    if (!m->merges_.find(pair_key(ia, ib))) m->merges_.put(pair_key(ia, ib), Merge{rank, iab});
    ++rank;
  }
  // A byte-level model without merges encodes every byte as its own token:
  // never what a GPT-2 vocabulary means, and the sign of a wrong or empty file.
  if (rank == 0) data_error(merges_name + ": no merges (the file is empty or holds only the #version line)");
  m->finish(vocab_name);
  return m;
}

std::shared_ptr<const BpeModel> BpeModel::parse_hf_json(std::string_view json, const std::string& name,
                                                        size_t shared_cache_words) {
  auto m = std::make_shared<BpeModel>();
  m->word_cache_ = std::make_unique<SharedWordCache>(shared_cache_words, shared_cache_words * 64);
  m->format_ = "tokenizer.json";
  JsonCtx j{name};
  rapidjson::Document d = parse_json(json, name);
  const rapidjson::Value& model = j.object(d, "model", "");
  std::string type = j.string(model, "type", "model", "BPE");
  if (type != "BPE")
    unsupported(name + ": model.type: \"" + type + "\" is not supported by the bpe tokenizer (expected \"BPE\")");
  const rapidjson::Value& vocab = j.object(model, "vocab", "model.");
  const rapidjson::Value* added_list = j.get(d, "added_tokens");
  size_t entries = vocab.MemberCount() + (added_list && added_list->IsArray() ? added_list->Size() : 0);
  add_vocab(j, vocab, "model.vocab", entries, m->vocab_, m->tokens_);
  const rapidjson::Value* merges = j.get(model, "merges");
  if (!merges) data_error(name + ": model.merges: missing");
  if (!merges->IsArray()) j.type_error("model.merges", "an array", *merges);
  for (const char* key : {"continuing_subword_prefix", "end_of_word_suffix"}) {
    std::string s = j.string(model, key, "model", "");
    if (!s.empty()) unsupported(name + ": model." + key + ": \"" + s + "\" is not supported (only null)");
  }
  if (const rapidjson::Value* dr = j.get(model, "dropout")) {
    if (!dr->IsNumber()) j.type_error("model.dropout", "a number or null", *dr);
    if (dr->GetDouble() != 0.0) unsupported(name + ": model.dropout: BPE-dropout is not supported (expected null)");
  }
  m->byte_fallback_ = j.boolean(model, "byte_fallback", "model", false);
  m->fuse_unk_ = j.boolean(model, "fuse_unk", "model", false);
  m->ignore_merges_ = j.boolean(model, "ignore_merges", "model", false);
  std::string unk = j.string(model, "unk_token", "model", "");
  if (!unk.empty()) {
    m->unk_id_ = m->token_to_id(unk);
    if (m->unk_id_ < 0) data_error(name + ": model.unk_token: \"" + unk + "\" is not in model.vocab");
  }
  m->merges_.reserve(merges->Size());
  for (rapidjson::SizeType r = 0; r < merges->Size(); ++r) {
    const rapidjson::Value& e = (*merges)[r];
    std::string path = "model.merges[" + std::to_string(r) + "]";
    std::string a, b;
    if (e.IsString()) {
      std::string_view line(e.GetString(), e.GetStringLength());
      size_t sp = line.find(' ');
      if (sp == std::string_view::npos || sp == 0 || sp + 1 >= line.size() ||
          line.find(' ', sp + 1) != std::string_view::npos)
        data_error(name + ": " + path + ": expected two tokens separated by one space, found " + describe(e));
      a = line.substr(0, sp);
      b = line.substr(sp + 1);
    } else if (e.IsArray() && e.Size() == 2 && e[0].IsString() && e[1].IsString()) {
      a.assign(e[0].GetString(), e[0].GetStringLength());
      b.assign(e[1].GetString(), e[1].GetStringLength());
    } else {
      j.type_error(path, "a string \"a b\" or an array [\"a\", \"b\"]", e);
    }
    int32_t ia = m->token_to_id(a), ib = m->token_to_id(b), iab = m->token_to_id(a + b);
    if (ia < 0 || ib < 0 || iab < 0)
      data_error(name + ": " + path + ": token \"" + (ia < 0 ? a : ib < 0 ? b : a + b) + "\" is not in model.vocab");
    if (!m->merges_.find(pair_key(ia, ib))) m->merges_.put(pair_key(ia, ib), Merge{static_cast<int32_t>(r), iab});
  }
  if (const rapidjson::Value* added = j.get(d, "added_tokens")) {
    if (!added->IsArray()) j.type_error("added_tokens", "an array", *added);
    for (rapidjson::SizeType i = 0; i < added->Size(); ++i) {
      const rapidjson::Value& t = (*added)[i];
      std::string path = "added_tokens[" + std::to_string(i) + "]";
      if (!t.IsObject()) j.type_error(path, "an object", t);
      AddedToken a;
      a.content = j.string(t, "content", path, "");
      const rapidjson::Value* id = j.get(t, "id");
      if (!id || !id->IsUint()) data_error(name + ": " + path + ".id: expected a token id (an integer from 0)");
      check_id_bound(name + ": " + path + ".id", id->GetUint(), entries);
      if (a.content.empty()) data_error(name + ": " + path + ".content: missing or empty");
      a.id = static_cast<int32_t>(id->GetUint());
      a.special = j.boolean(t, "special", path, false);
      a.lstrip = j.boolean(t, "lstrip", path, false);
      a.rstrip = j.boolean(t, "rstrip", path, false);
      a.single_word = j.boolean(t, "single_word", path, false);
      a.normalized = j.boolean(t, "normalized", path, !a.special);
      if (m->tokens_.size() <= static_cast<size_t>(a.id)) m->tokens_.resize(static_cast<size_t>(a.id) + 1);
      // An added token usually repeats its model.vocab entry; another token at its id is a conflict.
      const std::string& held = m->tokens_[static_cast<size_t>(a.id)];
      if (!held.empty() && held != a.content)
        data_error(name + ": " + path + ": tokens \"" + held.substr(0, 40) + "\" and \"" + a.content.substr(0, 40) +
                   "\" both have id " + std::to_string(a.id));
      m->tokens_[static_cast<size_t>(a.id)] = a.content;
      m->vocab_[a.content] = a.id;
      m->added_.push_back(std::move(a));
    }
  }
  if (const rapidjson::Value* n = j.get(d, "normalizer")) parse_ops(j, *n, "normalizer", false, m->normalizer_);
  if (const rapidjson::Value* p = j.get(d, "pre_tokenizer")) parse_pre_tokenizer(j, *p, "pre_tokenizer", m->pre_);
  if (const rapidjson::Value* dec = j.get(d, "decoder")) parse_ops(j, *dec, "decoder", true, m->decoder_);
  m->byte_level_ = m->pre_.kind == PreTokenizer::kByteLevel;
  m->finish(name);
  return m;
}

void BpeModel::finish(const std::string& where) {
  std::fill(std::begin(byte_ids_), std::end(byte_ids_), -1);
  char buf[8];
  for (int b = 0; b < 256; ++b) {
    if (byte_level_) {
      std::string s;
      utf8_append(s, byte_alphabet()[static_cast<size_t>(b)]);
      byte_ids_[b] = token_to_id(s);
      if (byte_ids_[b] < 0) {
        std::snprintf(buf, sizeof buf, "%02X", b);
        data_error(where + ": the byte-level vocabulary lacks the token for byte 0x" + buf);
      }
    } else {
      std::snprintf(buf, sizeof buf, "<0x%02X>", b);
      byte_ids_[b] = token_to_id(buf);
    }
  }
  if (byte_fallback_ && std::any_of(std::begin(byte_ids_), std::end(byte_ids_), [](int32_t i) { return i < 0; }))
    data_error(where + ": model.byte_fallback is true but the vocabulary lacks some <0xNN> tokens");
  // Single-character tokens by code point (non-byte-level models look characters up).
  char_ids_.reserve(tokens_.size());
  for (size_t id = 0; id < tokens_.size(); ++id) {
    const std::string& t = tokens_[id];
    if (t.empty()) continue;
    char32_t cp;
    if (utf8_decode(reinterpret_cast<const unsigned char*>(t.data()), t.size(), &cp) == t.size() &&
        cp != kInvalidCodePoint && vocab_.find(t)->second == static_cast<int32_t>(id))
      char_ids_.put(uint64_t{cp} + 1, static_cast<int32_t>(id));
  }
  fast_decode_ = decoder_.size() == 1 && decoder_[0].kind == TextOp::kByteLevel;
  if (fast_decode_) {
    id_bytes_.resize(tokens_.size());
    for (size_t id = 0; id < tokens_.size(); ++id) {
      const std::string& t = tokens_[id];
      const auto* p = reinterpret_cast<const unsigned char*>(t.data());
      std::string& out = id_bytes_[id];
      for (size_t i = 0; i < t.size();) {
        char32_t cp;
        size_t len = utf8_decode(p + i, t.size() - i, &cp);
        int b = cp == kInvalidCodePoint ? -1 : alphabet_byte(cp);
        if (b >= 0) out.push_back(static_cast<char>(b));
        else out.append(t, i, len);
        i += len;
      }
    }
  }
}

void BpeModel::decode(const int32_t* ids, size_t n, std::string& out) const {
  if (fast_decode_) {
    for (size_t i = 0; i < n; ++i) out += id_bytes_[static_cast<size_t>(ids[i])];
    return;
  }
  std::vector<std::string> toks;
  toks.reserve(n);
  for (size_t i = 0; i < n; ++i) toks.push_back(tokens_[static_cast<size_t>(ids[i])]);
  if (decoder_.empty()) {  // no decoder: tokens joined as they are
    for (auto& t : toks) out += t;
    return;
  }
  for (const TextOp& op : decoder_) {
    switch (op.kind) {
      case TextOp::kReplace:
        for (auto& t : toks) replace_all(t, op.a, op.b);
        break;
      case TextOp::kByteFallback:
        // <0xNN> becomes the raw byte (the library substitutes U+FFFD for invalid UTF-8; we keep bytes).
        for (auto& t : toks) {
          unsigned v;
          if (t.size() == 6 && t[0] == '<' && t[1] == '0' && t[2] == 'x' && t[5] == '>' &&
              std::sscanf(t.c_str() + 3, "%2x", &v) == 1)
            t.assign(1, static_cast<char>(v));
        }
        break;
      case TextOp::kFuse: {
        std::string all;
        for (auto& t : toks) all += t;
        toks.assign(1, std::move(all));
        break;
      }
      case TextOp::kStrip:
        for (auto& t : toks) {
          size_t b = 0, e = t.size();
          for (int32_t k = 0; k < op.start && b < e && t.compare(b, op.a.size(), op.a) == 0; ++k) b += op.a.size();
          for (int32_t k = 0; k < op.stop && e >= b + op.a.size() && t.compare(e - op.a.size(), op.a.size(), op.a) == 0;
               ++k)
            e -= op.a.size();
          t = t.substr(b, e - b);
        }
        break;
      case TextOp::kMetaspace:
        for (size_t i = 0; i < toks.size(); ++i) {
          replace_all(toks[i], op.a, " ");
          if (i == 0 && op.start && !toks[i].empty() && toks[i][0] == ' ') toks[i].erase(0, 1);
        }
        break;
      case TextOp::kByteLevel:
        for (auto& t : toks) {
          std::string b;
          const auto* p = reinterpret_cast<const unsigned char*>(t.data());
          for (size_t i = 0; i < t.size();) {
            char32_t cp;
            size_t len = utf8_decode(p + i, t.size() - i, &cp);
            int v = cp == kInvalidCodePoint ? -1 : alphabet_byte(cp);
            if (v >= 0) b.push_back(static_cast<char>(v));
            else b.append(t, i, len);
            i += len;
          }
          t.swap(b);
        }
        break;
      default: break;
    }
  }
  for (auto& t : toks) out += t;
}

// ---------------------------------------------------------------------------
// Encoder

BpeEncoder::BpeEncoder(std::shared_ptr<const BpeModel> model, size_t cache_entries)
    : model_(std::move(model)), cache_(cache_entries) {}

BpeEncoder::~BpeEncoder() { model_->word_cache_->release(cache_writer_); }

void BpeEncoder::encode(std::string_view text, std::vector<int32_t>& out, bool first) {
  const BpeModel& m = *model_;
  if (text.empty()) return;
  if (!m.normalizer_.empty()) {
    norm_.assign(text);
    for (const TextOp& op : m.normalizer_) {
      switch (op.kind) {
        case TextOp::kPrepend:
          if (!norm_.empty()) norm_.insert(0, op.a);
          break;
        case TextOp::kReplace: replace_all(norm_, op.a, op.b); break;
        case TextOp::kNfc: norm_ = nfc(norm_); break;
        case TextOp::kNfd: norm_ = nfd(norm_); break;
        default: break;
      }
    }
    pretokenize(norm_, out, first);
  } else {
    pretokenize(text, out, first);
  }
}

void BpeEncoder::pretokenize(std::string_view text, std::vector<int32_t>& out, bool first) {
  const BpeModel& m = *model_;
  const PreTokenizer& p = m.pre_;
  switch (p.kind) {
    case PreTokenizer::kNone: encode_word(text, out); return;
    case PreTokenizer::kByteLevel: {
      std::string_view t = text;
      if (p.add_prefix_space && !t.empty() && t[0] != ' ') {
        if (text.data() == norm_.data()) norm_.insert(0, " ");
        else norm_.assign(" ").append(text);
        t = norm_;
      }
      if (!p.use_regex) {
        encode_word(t, out);
        return;
      }
      gpt2_split(t, [&](size_t off, size_t len) { encode_word(t.substr(off, len), out); });
      return;
    }
    case PreTokenizer::kMetaspace: {
      std::string s(text);
      replace_all(s, " ", p.replacement);
      if ((p.prepend == 2 || (p.prepend == 1 && first)) && s.compare(0, p.replacement.size(), p.replacement) != 0)
        s.insert(0, p.replacement);
      if (!p.split) {
        encode_word(s, out);
        return;
      }
      size_t start = 0;
      for (size_t i = s.find(p.replacement, 1); i != std::string::npos; i = s.find(p.replacement, i + 1)) {
        if (i > start) encode_word(std::string_view(s).substr(start, i - start), out);
        start = i;
      }
      if (start < s.size()) encode_word(std::string_view(s).substr(start), out);
      return;
    }
  }
}

void BpeEncoder::remember(std::string_view word, uint64_t h, const int32_t* ids, size_t n) {
  if (!model_->word_cache_->insert(cache_writer_, word, h, ids, n)) cache_.insert(word, h, ids, n);
}

void BpeEncoder::encode_word(std::string_view word, std::vector<int32_t>& out) {
  if (word.empty()) return;
  const BpeModel& m = *model_;
  constexpr size_t kCacheMaxWord = 256;
  uint64_t h = 0;
  if (word.size() <= kCacheMaxWord) {
    h = hash_bytes(word);
    const int32_t* ids;
    size_t n;
    if (m.word_cache_->find(word, h, &ids, &n) || cache_.find(word, h, &ids, &n)) {
      out.insert(out.end(), ids, ids + n);
      return;
    }
  }
  size_t before = out.size();
  if (m.ignore_merges_) {
    int32_t id = m.token_to_id(word);
    if (id >= 0) {
      out.push_back(id);
      if (h) remember(word, h, &id, 1);
      return;
    }
  }
  syms_.clear();
  const auto* s = reinterpret_cast<const unsigned char*>(word.data());
  if (m.byte_level_) {
    for (size_t i = 0; i < word.size(); ++i) syms_.push_back(m.byte_ids_[s[i]]);
  } else {
    bool last_unk = false;
    for (size_t i = 0; i < word.size();) {
      char32_t cp;
      size_t len = utf8_decode(s + i, word.size() - i, &cp);
      const int32_t* id = cp == kInvalidCodePoint ? nullptr : m.char_ids_.find(uint64_t{cp} + 1);
      if (id) {
        syms_.push_back(*id);
        last_unk = false;
      } else if (m.byte_fallback_) {
        for (size_t k = 0; k < len; ++k) syms_.push_back(m.byte_ids_[s[i + k]]);
        last_unk = false;
      } else if (m.unk_id_ >= 0) {
        if (!(m.fuse_unk_ && last_unk)) syms_.push_back(m.unk_id_);
        last_unk = true;
      } else {
        char buf[16];
        std::snprintf(buf, sizeof buf, "U+%04X", static_cast<unsigned>(cp == kInvalidCodePoint ? s[i] : cp));
        throw Error(ZC_ERR_DATA, std::string("character ") + buf +
                                     " is not in the vocabulary and the model has neither unk_token nor byte_fallback");
      }
      i += len;
    }
  }
  bpe(out);
  if (h) remember(word, h, out.data() + before, out.size() - before);
}

void BpeEncoder::bpe(std::vector<int32_t>& out) {
  const BpeModel& m = *model_;
  const size_t n = syms_.size();
  if (n < 2) {
    out.insert(out.end(), syms_.begin(), syms_.end());
    return;
  }
  if (n <= 64) {
    // Short words: repeatedly merge the lowest-ranked adjacent pair (leftmost on ties).
    size_t len = n;
    int32_t* w = syms_.data();
    for (;;) {
      int32_t best_rank = INT32_MAX, best_id = -1;
      size_t best = 0;
      for (size_t k = 0; k + 1 < len; ++k) {
        const BpeModel::Merge* mg = m.merges_.find(pair_key(w[k], w[k + 1]));
        if (mg && mg->rank < best_rank) {
          best_rank = mg->rank;
          best_id = mg->id;
          best = k;
        }
      }
      if (best_id < 0) break;
      w[best] = best_id;
      std::copy(w + best + 2, w + len, w + best + 1);
      --len;
    }
    out.insert(out.end(), w, w + len);
    return;
  }
  // Long words (no spaces for kilobytes, or a whole Llama segment): a min-heap of
  // candidate merges over a linked list, O(n log n), as in the tokenizers library.
  prev_.resize(n);
  next_.resize(n);
  for (size_t k = 0; k < n; ++k) {
    prev_[k] = static_cast<int32_t>(k) - 1;
    next_[k] = k + 1 < n ? static_cast<int32_t>(k + 1) : -1;
  }
  heap_.clear();
  auto later = [](const HeapItem& a, const HeapItem& b) {
    return a.rank > b.rank || (a.rank == b.rank && a.pos > b.pos);
  };
  auto push = [&](int32_t pos) {
    int32_t q = next_[static_cast<size_t>(pos)];
    if (pos < 0 || q < 0) return;
    if (const BpeModel::Merge* mg =
            m.merges_.find(pair_key(syms_[static_cast<size_t>(pos)], syms_[static_cast<size_t>(q)]))) {
      heap_.push_back({mg->rank, pos});
      std::push_heap(heap_.begin(), heap_.end(), later);
    }
  };
  for (size_t k = 0; k + 1 < n; ++k) push(static_cast<int32_t>(k));
  while (!heap_.empty()) {
    std::pop_heap(heap_.begin(), heap_.end(), later);
    HeapItem top = heap_.back();
    heap_.pop_back();
    size_t p = static_cast<size_t>(top.pos);
    if (syms_[p] < 0 || next_[p] < 0) continue;
    size_t q = static_cast<size_t>(next_[p]);
    const BpeModel::Merge* mg = m.merges_.find(pair_key(syms_[p], syms_[q]));
    if (!mg || mg->rank != top.rank) continue;  // stale entry
    syms_[p] = mg->id;
    syms_[q] = -1;
    next_[p] = next_[q];
    if (next_[q] >= 0) prev_[static_cast<size_t>(next_[q])] = static_cast<int32_t>(p);
    if (prev_[p] >= 0) push(prev_[p]);
    push(static_cast<int32_t>(p));
  }
  for (int32_t k = 0; k >= 0; k = next_[static_cast<size_t>(k)]) out.push_back(syms_[static_cast<size_t>(k)]);
}

std::vector<std::vector<int32_t>> encode_batch(const std::shared_ptr<const BpeModel>& model,
                                               const std::vector<std::string_view>& texts, int num_threads) {
  std::vector<std::vector<int32_t>> out(texts.size());
  size_t nt = static_cast<size_t>(std::max(1, num_threads));
  nt = std::min(nt, std::max<size_t>(1, texts.size()));
  std::vector<std::thread> pool;
  std::vector<std::exception_ptr> errors(nt);
  std::atomic<size_t> next{0};
  for (size_t t = 0; t < nt; ++t) {
    pool.emplace_back([&, t] {
      try {
        BpeEncoder enc(model);
        std::vector<int32_t> ids;
        // Texts are claimed one at a time (a shared counter), so a thread
        // slowed by a neighbour on the shared VM does not hold the batch
        // back.
        for (size_t i = next.fetch_add(1, std::memory_order_relaxed); i < texts.size();
             i = next.fetch_add(1, std::memory_order_relaxed)) {
          // Encode into this thread's own buffer and copy once: appending to
          // out[i] directly would write its end pointer per token, and the
          // headers of out[i] and out[i + 1] (claimed by the other thread)
          // share a cache line, which then bounces between the cores.
          ids.clear();
          enc.encode(texts[i], ids);
          out[i].assign(ids.begin(), ids.end());
        }
      } catch (...) {
        errors[t] = std::current_exception();
      }
    });
  }
  for (auto& th : pool) th.join();
  for (auto& e : errors)
    if (e) std::rethrow_exception(e);
  return out;
}

}  // namespace zcode::tok
