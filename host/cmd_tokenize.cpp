// zcode-host tokenize: encode, decode and inspect a tokenizer plugin through
// the core registry; zcode-host tokenizer train: train a SentencePiece vocabulary
// (library API) on JSONL or plain text with the GLM-5.2 specials at ids 0..3.
#include "cli_common.h"
#include "commands.h"
#include "tokenizer_common.h"  // kTrainedMarkerVersion

#include <zcode/core/host_services.h>
#include <zcode/core/log.h>
#include <zcode/core/registry.h>
#include <zcode/core/stage_factory.h>
#include <zcode/sdk/buffers.h>
#include <zcode/sdk/json.h>

#include <rapidjson/document.h>
#include <rapidjson/error/en.h>
#include <sentencepiece_processor.h>
#include <sentencepiece_trainer.h>

#include <unistd.h>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <iostream>
#include <sstream>

namespace zcode::host {
namespace fs = std::filesystem;
namespace {

std::string json_quote(std::string_view s) {
  std::string o = "\"";
  for (unsigned char c : s) {
    if (c == '"' || c == '\\') {
      o += '\\';
      o += static_cast<char>(c);
    } else if (c < 0x20) {
      char b[8];
      std::snprintf(b, sizeof b, "\\u%04x", c);
      o += b;
    } else o += static_cast<char>(c);
  }
  return o + "\"";
}

// Writes `data` to `path` atomically: temp file in the same folder, fsync, rename.
void write_atomic(const fs::path& path, const std::string& data) {
  fs::path tmp = path;
  tmp += ".tmp." + std::to_string(::getpid());
  FILE* f = std::fopen(tmp.c_str(), "wb");
  if (!f) throw std::runtime_error(tmp.string() + ": cannot create file");
  bool ok =
      std::fwrite(data.data(), 1, data.size(), f) == data.size() && std::fflush(f) == 0 && ::fsync(fileno(f)) == 0;
  ok = (std::fclose(f) == 0) && ok;
  if (!ok) {
    fs::remove(tmp);
    throw std::runtime_error(path.string() + ": write failed");
  }
  fs::rename(tmp, path);
}

}  // namespace

int cmd_tokenize(const std::vector<std::string>& args) {
  // stdout is this command's data (text, ids, listings): log lines, INFO too, go to stderr.
  log::set_data_on_stdout(true);
  const CommandHelp help{
      "zcode-host tokenize --tokenizer REF [--file F | TEXT] [--ids | --tokens] [--decode IDS] [--info]",
      "Encode TEXT (or a file) into ids, decode ids, or print the vocabulary size and every special token. "
      "REF is a file, a folder, hf://NAME (resolved offline) or a JSON object like the config's data.tokenizer.",
      "  zcode-host tokenize --tokenizer hf://gpt2 \"Hello world\"\n"
      "  zcode-host tokenize --tokenizer hf://gpt2 --tokens --file notes.txt\n"
      "  zcode-host tokenize --tokenizer hf://llama2 --decode \"1 22557 1526\"\n"
      "  zcode-host tokenize --tokenizer out/tok/tokenizer.model --info --moe-experts 8"};
  std::string ref, type, file, text, decode;
  bool ids = false, tokens = false, info = false, allow_special = false;
  int64_t experts = -1;
  PluginFlags plugins;
  po::options_description d("options");
  d.add_options()("tokenizer", po::value(&ref)->required(),
                  "tokenizer reference (file, folder, hf://NAME or JSON object)")(
      "type", po::value(&type), "tokenizer component (default: sentencepiece for *.model, else bpe)")(
      "file", po::value(&file), "encode the contents of this file")(
      "text", po::value(&text), "text to encode (positional)")("ids", po::bool_switch(&ids),
                                                               "print ids, space-separated (the default)")(
      "tokens", po::bool_switch(&tokens), "print one `id<TAB>token` line per token")(
      "decode", po::value(&decode), "decode these ids (space- or comma-separated)")(
      "info", po::bool_switch(&info), "print the vocabulary size and every special token with its id")(
      "allow-special", po::bool_switch(&allow_special),
      "parse special-token text as specials (ZC_ENCODE_ALLOW_SPECIAL)")(
      "moe-experts", po::value(&experts), "model.moe_experts for the <expert_i> specials (default 0)");
  plugins.add_to(d);
  po::positional_options_description pos;
  pos.add("text", 1);
  po::variables_map vm;
  if (auto rc = parse_args("tokenize", args, d, pos, vm, help)) return *rc;
  int modes = (vm.count("file") || vm.count("text")) + (vm.count("decode") ? 1 : 0) + (info ? 1 : 0);
  if (modes != 1 || (vm.count("file") && vm.count("text")) || (ids && tokens)) {
    std::cerr << "zcode-host tokenize: give exactly one of TEXT, --file F, --decode IDS or --info (see --help)\n";
    return kUsageError;
  }
  try {
    // Options object as the host builds it from data.tokenizer.
    std::string options;
    rapidjson::Document od;
    if (!ref.empty() && ref[0] == '{') {
      od.Parse(ref.c_str());
      if (od.HasParseError() || !od.IsObject()) {
        std::cerr << "zcode-host tokenize: --tokenizer: not a JSON object: " << ref << "\n";
        return kUsageError;
      }
      options = ref;
      if (type.empty() && od.HasMember("type") && od["type"].IsString()) type = od["type"].GetString();
      if (type.empty() && od.HasMember("path") && od["path"].IsString()) {
        std::string p = od["path"].GetString();
        type = p.size() > 6 && p.compare(p.size() - 6, 6, ".model") == 0 ? "sentencepiece" : "bpe";
      }
    } else {
      options = sdk::json::Writer().begin_object().key("path").string(ref).end_object().str();
      if (type.empty())
        type = ref.size() > 6 && ref.compare(ref.size() - 6, 6, ".model") == 0 ? "sentencepiece" : "bpe";
      // A folder holding only a SentencePiece model (what `tokenizer train` writes).
      std::error_code ec;
      fs::path dir(ref);
      if (!vm.count("type") && fs::is_directory(dir, ec) && fs::is_regular_file(dir / "tokenizer.model", ec) &&
          !fs::exists(dir / "tokenizer.json", ec) && !fs::exists(dir / "vocab.json", ec) &&
          !fs::exists(dir / "encoder.json", ec))
        type = "sentencepiece";
    }
    if (type.empty()) type = "bpe";
    // model.moe_experts sizes the <expert_i> specials.
    sdk::json::Writer cw;
    cw.begin_object();
    if (experts >= 0) cw.key("model").begin_object().key("moe_experts").integer(experts).end_object();
    const std::string config = cw.end_object().str();

    Registry registry(plugins.search());
    HostServices hs(0, 1);
    const fs::path no_run_dir;  // tokenize writes nothing
    StageInstance inst = StageFactory(registry, hs, config, no_run_dir)
                             .create(ZC_KIND_TOKENIZER, type, "data.tokenizer.type", options, {.split = "train"});
    const Component& comp = *inst.component();
    const auto* t = comp.as<zc_tokenizer_table>();

    if (info) {
      const char* j = nullptr;
      check_plugin_call(comp, "info_json", t->info_json(inst.get(), &j));
      rapidjson::Document doc;
      doc.Parse(j);
      if (doc.HasParseError() || !doc.IsObject()) throw std::runtime_error("tokenizer info_json is not a JSON object");
      uint64_t n = 0;
      check_plugin_call(comp, "vocab_size", t->vocab_size(inst.get(), &n));
      std::cout << "tokenizer: " << comp.name << " (" << (doc.HasMember("format") ? doc["format"].GetString() : "?")
                << ")\n";
      if (doc.HasMember("files") && doc["files"].IsArray())
        for (auto& f : doc["files"].GetArray()) std::cout << "file: " << f.GetString() << "\n";
      std::cout << "vocab_size: " << n << "\n";
      if (doc.HasMember("identity")) std::cout << "identity: " << doc["identity"].GetString() << "\n";
      for (const char* k : {"pad_id", "bos_id", "eos_id", "mask_id"})
        if (doc.HasMember(k)) std::cout << k << ": " << doc[k].GetInt() << "\n";
      std::cout << "specials:\n";
      if (doc.HasMember("specials") && doc["specials"].IsObject())
        for (auto it = doc["specials"].MemberBegin(); it != doc["specials"].MemberEnd(); ++it)
          std::cout << "  " << it->value.GetInt() << "\t" << it->name.GetString() << "\n";
      if (doc.HasMember("special_aliases") && doc["special_aliases"].IsObject())
        for (auto it = doc["special_aliases"].MemberBegin(); it != doc["special_aliases"].MemberEnd(); ++it)
          std::cout << "alias: " << it->name.GetString() << " is the vocabulary's " << it->value.GetString() << "\n";
      return kOk;
    }
    if (vm.count("decode")) {
      std::vector<int32_t> v;
      std::string s = decode;
      for (char& c : s)
        if (c == ',') c = ' ';
      std::istringstream in(s);
      std::string tok;
      while (in >> tok) {
        char* end = nullptr;
        long x = std::strtol(tok.c_str(), &end, 10);
        if (!end || *end || x < INT32_MIN || x > INT32_MAX) {
          std::cerr << "zcode-host tokenize: --decode: '" << tok << "' is not an integer id\n";
          return kUsageError;
        }
        v.push_back(static_cast<int32_t>(x));
      }
      std::string out;
      zc_bytes b = zcode::sdk::bytes_into(out);
      check_plugin_call(comp, "decode", t->decode(inst.get(), v.data(), v.size(), &b));
      out.resize(b.size);
      std::cout << out << "\n";
      return kOk;
    }
    if (vm.count("file")) {
      std::ifstream f(file, std::ios::binary);
      if (!f) {
        std::cerr << "zcode-host tokenize: --file: '" << file << "' not found\n";
        return kUsageError;
      }
      std::ostringstream ss;
      ss << f.rdbuf();
      text = ss.str();
    }
    std::vector<int32_t> v;
    zc_ids out = zcode::sdk::ids_into(v);
    check_plugin_call(comp, "encode",
                      t->encode(inst.get(), text.data(), text.size(),
                                allow_special ? static_cast<uint32_t>(ZC_ENCODE_ALLOW_SPECIAL) : 0u, &out));
    v.resize(out.size);
    if (tokens) {
      for (int32_t id : v) {
        std::string s;
        zc_bytes b = zcode::sdk::bytes_into(s);
        check_plugin_call(comp, "id_to_token", t->id_to_token(inst.get(), id, &b));
        s.resize(b.size);
        std::cout << id << "\t" << json_quote(s) << "\n";
      }
    } else {
      for (size_t i = 0; i < v.size(); ++i) std::cout << (i ? " " : "") << v[i];
      std::cout << "\n";
    }
    return kOk;
  } catch (...) {
    return report_current_exception("tokenize");
  }
}

namespace {

// Feeds SentencePiece's trainer one sentence per line: the `text_field` of each
// JSONL record, or each line of a plain-text file. Bad records stop training
// with `file:line:col: message`.
class LineIterator : public sentencepiece::SentenceIterator {
 public:
  LineIterator(std::vector<std::string> files, std::string field) : files_(std::move(files)), field_(std::move(field)) {
    advance();
  }
  bool done() const override { return done_; }
  void Next() override { advance(); }
  const std::string& value() const override { return value_; }
  sentencepiece::util::Status status() const override { return status_; }
  uint64_t sentences() const { return count_; }

 private:
  void advance() {
    for (;;) {
      if (!in_.is_open()) {
        if (next_file_ >= files_.size()) {
          done_ = true;
          return;
        }
        name_ = files_[next_file_++];
        in_.open(name_, std::ios::binary);
        line_no_ = 0;
        if (!in_) {
          fail(name_ + ": cannot open file");
          return;
        }
        jsonl_ = name_.size() > 6 && (name_.compare(name_.size() - 6, 6, ".jsonl") == 0 ||
                                      name_.compare(name_.size() - 5, 5, ".json") == 0);
      }
      std::string line;
      if (!std::getline(in_, line)) {
        in_.close();
        in_.clear();
        continue;
      }
      ++line_no_;
      if (!line.empty() && line.back() == '\r') line.pop_back();
      if (line.find_first_not_of(" \t") == std::string::npos) continue;
      if (!jsonl_) {
        value_ = line;
        ++count_;
        return;
      }
      rapidjson::Document d;
      const zcode::sdk::json::Result parsed = zcode::sdk::json::parse(d, line);  // iterative, 256 levels at most
      std::string where = name_ + ":" + std::to_string(line_no_);
      if (!parsed.ok()) {
        fail(where + ":" + std::to_string(parsed.offset + 1) + ": " + (parsed.too_deep ? "" : "invalid JSON: ") +
             parsed.message());
        return;
      }
      if (!d.IsObject() || !d.HasMember(field_.c_str())) {
        fail(where + ":1: missing field \"" + field_ + "\"");
        return;
      }
      const rapidjson::Value& v = d[field_.c_str()];
      if (!v.IsString()) {
        fail(where + ":1: field \"" + field_ + "\" is not a string");
        return;
      }
      value_.assign(v.GetString(), v.GetStringLength());
      ++count_;
      return;
    }
  }
  void fail(const std::string& msg) {
    status_ = sentencepiece::util::Status(sentencepiece::util::StatusCode::kInvalidArgument, msg);
    done_ = true;
  }
  std::vector<std::string> files_;
  std::string field_, name_, value_;
  size_t next_file_ = 0, line_no_ = 0;
  uint64_t count_ = 0;
  std::ifstream in_;
  bool jsonl_ = false, done_ = false;
  sentencepiece::util::Status status_;
};

}  // namespace

int cmd_tokenizer(const std::vector<std::string>& args) {
  const CommandHelp help{
      "zcode-host tokenizer train --input FILE... --vocab-size N --model-type bpe|unigram --out DIR [options]",
      "Train a SentencePiece vocabulary on JSONL (`text` field) or plain-text files. Writes DIR/tokenizer.model and "
      "DIR/zcode_tokenizer.json (the marker that makes the tokenizer plugins use the guide's special ids: "
      "<pad> 0, <bos> 1, <eos> 2, <mask> 3, <unk> 4; the other GLM-5.2 specials, <expert_i> and <image>, take the ids "
      "right after the learned vocabulary unless data.tokenizer.special_tokens pins them).",
      "  zcode-host tokenizer train --input data/train.jsonl --vocab-size 8000 --model-type unigram --out out/tok"};
  std::vector<std::string> sub_and_inputs;
  std::vector<std::string> inputs;
  std::string model_type = "unigram", out_dir, text_field = "text";
  int64_t vocab = 0;
  double coverage = 0.9995;
  bool byte_fallback = false;
  po::options_description d("options");
  d.add_options()("action", po::value(&sub_and_inputs)->composing(), "train")(
      "input", po::value(&inputs)->multitoken()->composing(),
      "training files: *.jsonl / *.json (JSON lines) or plain text")("vocab-size", po::value(&vocab)->required(),
                                                                     "vocabulary size, specials included")(
      "model-type", po::value(&model_type), "bpe or unigram (default unigram)")(
      "out", po::value(&out_dir)->required(), "output folder")("text-field", po::value(&text_field),
                                                               "JSONL field holding the text (default text)")(
      "character-coverage", po::value(&coverage), "fraction of characters covered (default 0.9995)")(
      "byte-fallback", po::bool_switch(&byte_fallback), "add <0xNN> byte pieces so no character is <unk>");
  po::positional_options_description pos;
  pos.add("action", -1);
  po::variables_map vm;
  if (auto rc = parse_args("tokenizer", args, d, pos, vm, help)) return *rc;
  if (sub_and_inputs.empty() || sub_and_inputs[0] != "train" || sub_and_inputs.size() > 1) {
    std::cerr << "zcode-host tokenizer: expected the action `train` (see --help)\n";
    return kUsageError;
  }
  if (inputs.empty()) {
    std::cerr << "zcode-host tokenizer train: --input: at least one file is required\n";
    return kUsageError;
  }
  if (model_type != "bpe" && model_type != "unigram") {
    std::cerr << "zcode-host tokenizer train: --model-type: expected bpe or unigram, found '" << model_type << "'\n";
    return kUsageError;
  }
  if (vocab < 16 || vocab > 1000000) {
    std::cerr << "zcode-host tokenizer train: --vocab-size: expected 16..1000000, found " << vocab << "\n";
    return kUsageError;
  }
  for (const std::string& f : inputs)
    if (!fs::is_regular_file(f)) {
      std::cerr << "zcode-host tokenizer train: --input: file '" << f << "' not found\n";
      return kUsageError;
    }
  try {
    fs::create_directories(out_dir);
    LineIterator it(inputs, text_field);
    std::unordered_map<std::string, std::string> kw = {
        {"model_type", model_type},
        {"vocab_size", std::to_string(vocab)},
        {"character_coverage", std::to_string(coverage)},
        {"pad_id", "0"},
        {"bos_id", "1"},
        {"eos_id", "2"},
        {"unk_id", "4"},
        {"pad_piece", "<pad>"},
        {"bos_piece", "<bos>"},
        {"eos_piece", "<eos>"},
        {"unk_piece", "<unk>"},
        // A control symbol (not user_defined): never matched in text, so data cannot inject it.
        {"control_symbols", "<mask>"},
        {"byte_fallback", byte_fallback ? "true" : "false"},
        {"num_threads", "2"},
        {"minloglevel", "1"}};
    std::string proto;
    auto st = sentencepiece::SentencePieceTrainer::Train(kw, &it, &proto);
    if (!it.status().ok()) {
      std::cerr << "[ERROR] tokenizer train: " << it.status().message() << "\n";
      return kUsageError;
    }
    if (!st.ok()) {
      std::cerr << "[ERROR] tokenizer train: " << st.ToString() << "\n";
      return kRuntimeError;
    }
    // Check the ids the plugins rely on before writing anything.
    sentencepiece::SentencePieceProcessor sp;
    if (!sp.LoadFromSerializedProto(proto).ok()) throw std::runtime_error("the trained model does not load");
    const char* want[] = {"<pad>", "<bos>", "<eos>", "<mask>", "<unk>"};
    for (int i = 0; i < 5; ++i)
      if (sp.IdToPiece(i) != want[i])
        throw std::runtime_error(std::string("trained model has '") + sp.IdToPiece(i) + "' at id " + std::to_string(i) +
                                 ", expected " + want[i]);
    fs::path dir(out_dir);
    write_atomic(dir / "tokenizer.model", proto);
    // Version 2: specials missing from the vocabulary follow it (version 1
    // gave them the guide's ids 1000 + i and 250000, leaving a gap).
    std::string marker = "{\"trained_by\":\"zcode\",\"version\":" + std::to_string(tok::kTrainedMarkerVersion) +
                         ",\"special_ids\":\"after_vocabulary\",\"model_type\":" + json_quote(model_type) +
                         ",\"vocab_size\":" + std::to_string(sp.GetPieceSize()) +
                         ",\"specials\":{\"<pad>\":0,\"<bos>\":1,\"<eos>\":2,\"<mask>\":3,\"<unk>\":4},\"sentences\":" +
                         std::to_string(it.sentences()) + ",\"inputs\":[";
    for (size_t i = 0; i < inputs.size(); ++i) marker += (i ? "," : "") + json_quote(inputs[i]);
    marker += "]}\n";
    write_atomic(dir / "zcode_tokenizer.json", marker);
    std::cout << "tokenizer train: " << model_type << " vocabulary of " << sp.GetPieceSize() << " pieces from "
              << it.sentences() << " sentences -> " << (dir / "tokenizer.model").string() << "\n";
    return kOk;
  } catch (...) {
    return report_current_exception("tokenizer train");
  }
}

}  // namespace zcode::host
