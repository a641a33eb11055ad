// zcode-host tokenize: encode, decode and inspect a tokenizer plugin through
// the core registry; zcode-host tokenizer train: the CLI of
// zcode::train_tokenizer (zcode/core/tokenizer_train.h).
#include "cli_common.h"
#include "commands.h"

#include <zcode/core/host_services.h>
#include <zcode/core/log.h>
#include <zcode/core/registry.h>
#include <zcode/core/stage_factory.h>
#include <zcode/core/tokenizer_train.h>
#include <zcode/sdk/buffers.h>
#include <zcode/sdk/json.h>
#include <zcode/sdk/tokenizer_files.h>

#include <rapidjson/document.h>

#include <filesystem>
#include <fstream>
#include <iostream>
#include <sstream>

namespace zcode::host {
namespace fs = std::filesystem;
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
      if (type.empty() && od.HasMember("path") && od["path"].IsString())
        type = sdk::tokenizer_plugin_for_reference(od["path"].GetString());
    } else {
      options = sdk::json::Writer().begin_object().key("path").string(ref).end_object().str();
      if (type.empty()) type = sdk::tokenizer_plugin_for_reference(ref);
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
        std::cout << id << "\t" << sdk::json::quote(s) << "\n";
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

int cmd_tokenizer(const std::vector<std::string>& args) {
  const CommandHelp help{
      "zcode-host tokenizer train --input FILE... --vocab-size N --model-type bpe|unigram --out DIR [options]",
      "Train a SentencePiece vocabulary on JSONL (`text` field) or plain-text files. Writes DIR/tokenizer.model and "
      "DIR/zcode_tokenizer.json (the marker that makes the tokenizer plugins use the guide's special ids: "
      "<pad> 0, <bos> 1, <eos> 2, <mask> 3, <unk> 4; the other GLM-5.2 specials, <expert_i> and <image>, take the ids "
      "right after the learned vocabulary unless data.tokenizer.special_tokens pins them).",
      "  zcode-host tokenizer train --input data/train.jsonl --vocab-size 8000 --model-type unigram --out out/tok"};
  std::vector<std::string> action;
  TokenizerTrainOptions o;
  po::options_description d("options");
  d.add_options()("action", po::value(&action)->composing(), "train")(
      "input", po::value(&o.inputs)->multitoken()->composing(),
      "training files: *.jsonl / *.json (JSON lines) or plain text")("vocab-size", po::value(&o.vocab_size)->required(),
                                                                     "vocabulary size, specials included")(
      "model-type", po::value(&o.model_type), "bpe or unigram (default unigram)")(
      "out", po::value(&o.out_dir)->required(), "output folder")("text-field", po::value(&o.text_field),
                                                                 "JSONL field holding the text (default text)")(
      "character-coverage", po::value(&o.character_coverage), "fraction of characters covered (default 0.9995)")(
      "byte-fallback", po::bool_switch(&o.byte_fallback), "add <0xNN> byte pieces so no character is <unk>");
  po::positional_options_description pos;
  pos.add("action", -1);
  po::variables_map vm;
  if (auto rc = parse_args("tokenizer", args, d, pos, vm, help)) return *rc;
  if (action.size() != 1 || action[0] != "train") {
    std::cerr << "zcode-host tokenizer: expected the action `train` (see --help)\n";
    return kUsageError;
  }
  try {
    const TokenizerTrainResult r = train_tokenizer(o);
    std::cout << "tokenizer train: " << o.model_type << " vocabulary of " << r.vocab_size << " pieces from "
              << r.sentences << " sentences -> " << r.model_path << "\n";
    return kOk;
  } catch (const TokenizerTrainError& e) {
    const bool bad_input = e.kind() == TokenizerTrainError::Kind::kBadInput;
    if (!e.option().empty())  // a flag out of range: a usage error naming the flag
      std::cerr << "zcode-host tokenizer train: --" << e.option() << ": " << e.what() << "\n";
    else std::cerr << "[ERROR] tokenizer train: " << e.what() << "\n";
    return bad_input ? kUsageError : kRuntimeError;
  } catch (...) {
    return report_current_exception("tokenizer train");
  }
}

}  // namespace zcode::host
