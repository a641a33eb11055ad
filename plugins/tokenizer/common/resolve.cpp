// resolve.cpp: tokenizer references (path or hf://NAME) resolved offline, and
// the identity hash.
#include "tokenizer_common.h"

#include <zcode/sdk/error.h>
#include <zcode/sdk/json.h>
#include <zcode/sdk/tokenizer_files.h>

#include <openssl/evp.h>
#include <rapidjson/document.h>

#include <dlfcn.h>

#include <algorithm>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <optional>

namespace zcode::tok {
namespace fs = std::filesystem;
namespace {

using sdk::Error;

bool is_file(const fs::path& p) {
  std::error_code ec;
  return fs::is_regular_file(p, ec);
}

// The tokenizer files inside one folder, in order of preference: the SDK's
// rule, so the plugin the host picks by name is the one that accepts them.
bool find_in_dir(const fs::path& dir, ResolvedRef& out) {
  std::optional<sdk::TokenizerFiles> found = sdk::tokenizer_files_in_folder(dir);
  if (!found) return false;
  out = ResolvedRef{};
  if (is_file(dir / kTrainedMarker)) out.marker = (dir / kTrainedMarker).string();
  out.kind = std::move(found->kind);
  out.files = std::move(found->files);
  return true;
}

// Folder holding this plugin's .so (for the installed assets folder).
std::string plugin_dir() {
  Dl_info info{};
  if (dladdr(reinterpret_cast<void*>(&plugin_dir), &info) && info.dli_fname)
    return fs::path(info.dli_fname).parent_path().string();
  return "";
}

std::string env(const char* name) {
  const char* v = std::getenv(name);
  return v ? v : "";
}

}  // namespace

std::vector<std::string> hf_search_dirs(const std::string& name) {
  std::vector<std::string> hubs;
  if (!env("HF_HUB_CACHE").empty()) hubs.push_back(env("HF_HUB_CACHE"));
  if (!env("HF_HOME").empty()) hubs.push_back(env("HF_HOME") + "/hub");
  if (!env("HOME").empty()) hubs.push_back(env("HOME") + "/.cache/huggingface/hub");
  std::string flat = name;
  for (size_t p; (p = flat.find('/')) != std::string::npos;) flat.replace(p, 1, "--");
  std::vector<std::string> out;
  for (const std::string& hub : hubs) {
    fs::path snaps = fs::path(hub) / ("models--" + flat) / "snapshots";
    // refs/main names the snapshot the hub client considers current; try it first.
    std::ifstream ref(fs::path(hub) / ("models--" + flat) / "refs" / "main");
    std::string commit;
    if (ref && std::getline(ref, commit) && !commit.empty()) out.push_back((snaps / commit).string());
    std::error_code ec;
    std::vector<std::string> all;
    for (auto& e : fs::directory_iterator(snaps, ec)) all.push_back(e.path().string());
    std::sort(all.begin(), all.end());
    for (auto& a : all)
      if (std::find(out.begin(), out.end(), a) == out.end()) out.push_back(a);
    if (all.empty() && commit.empty()) out.push_back((snaps / "*").string());
  }
  // No path of the build tree is compiled in: the installed layout finds its
  // own assets next to its plugins, and the build tree (which mirrors it)
  // has share/zcode/assets as a link to the fetched assets (CMakeLists.txt).
  if (!env("ZCODE_ASSETS_DIR").empty()) {
    out.push_back(env("ZCODE_ASSETS_DIR") + "/hf/" + name);
  } else {
    std::string pd = plugin_dir();  // <prefix>/lib/zcode/plugins -> <prefix>/share/zcode/assets
    if (!pd.empty())
      out.push_back(
          (fs::path(pd) / ".." / ".." / ".." / "share" / "zcode" / "assets" / "hf" / name).lexically_normal().string());
    // The per-user cache scripts/fetch-assets.sh --user fills (XDG base directories).
    if (!env("XDG_DATA_HOME").empty()) out.push_back(env("XDG_DATA_HOME") + "/zcode/assets/hf/" + name);
    else if (!env("HOME").empty()) out.push_back(env("HOME") + "/.local/share/zcode/assets/hf/" + name);
  }
  return out;
}

ResolvedRef resolve_reference(const std::string& ref, const std::string& option_path) {
  ResolvedRef r;
  if (ref.empty()) throw Error(ZC_ERR_INVALID_ARGUMENT, option_path + ": missing (a file, a folder or hf://NAME)");
  if (ref.rfind("hf://", 0) == 0) {
    std::string name = ref.substr(5);
    if (name.empty() || name.find("..") != std::string::npos)
      throw Error(ZC_ERR_INVALID_ARGUMENT, option_path + ": '" + ref + "' is not a valid hf://NAME reference");
    std::vector<std::string> dirs = hf_search_dirs(name);
    for (const std::string& d : dirs)
      if (find_in_dir(d, r)) return r;
    std::string list;
    for (const std::string& d : dirs) list += (list.empty() ? "" : ", ") + d;
    throw Error(ZC_ERR_NOT_FOUND,
                option_path + ": '" + ref + "' not found offline (no network is used); searched: " + list +
                    ". Provide tokenizer.json (or vocab.json + merges.txt) in one of these folders, or run "
                    "scripts/fetch-assets.sh, which provides hf://gpt2 and hf://llama2");
  }
  fs::path p(ref);
  std::error_code ec;
  if (fs::is_directory(p, ec)) {
    if (find_in_dir(p, r)) return r;
    throw Error(ZC_ERR_NOT_FOUND,
                option_path + ": folder '" + ref +
                    "' has no tokenizer.json, vocab.json + merges.txt, encoder.json + vocab.bpe or *.model");
  }
  if (!is_file(p)) throw Error(ZC_ERR_NOT_FOUND, option_path + ": file '" + ref + "' not found");
  fs::path dir = p.parent_path().empty() ? fs::path(".") : p.parent_path();
  if (is_file(dir / kTrainedMarker)) r.marker = (dir / kTrainedMarker).string();
  std::string fname = p.filename().string();
  if (sdk::is_sentencepiece_model_name(p)) {
    r.kind = "sentencepiece";
    r.files = {p.string()};
  } else if (fname == "vocab.json" || fname == "encoder.json") {
    fs::path m = dir / (fname == "vocab.json" ? "merges.txt" : "vocab.bpe");
    if (!is_file(m))
      throw Error(ZC_ERR_NOT_FOUND,
                  option_path + ": '" + ref + "' needs its merges file '" + m.string() + "' next to it");
    r.kind = "gpt2";
    r.files = {p.string(), m.string()};
  } else if (fname == "merges.txt" || fname == "vocab.bpe") {
    fs::path v = dir / (fname == "merges.txt" ? "vocab.json" : "encoder.json");
    if (!is_file(v))
      throw Error(ZC_ERR_NOT_FOUND,
                  option_path + ": '" + ref + "' needs its vocabulary '" + v.string() + "' next to it");
    r.kind = "gpt2";
    r.files = {v.string(), p.string()};
  } else {
    r.kind = "tokenizer.json";  // any other file is read as a Hugging Face tokenizer.json
    r.files = {p.string()};
  }
  return r;
}

int marker_version(const std::string& path) {
  if (path.empty()) return 0;
  std::ifstream in(path, std::ios::binary);
  std::string text((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  if (!in && !in.eof()) throw Error(ZC_ERR_IO, path + ": cannot read the tokenizer train marker");
  rapidjson::Document d;
  const sdk::json::Result r = sdk::json::parse(d, text);  // bounded depth: the marker is a file like any other
  if (!r.ok())
    throw Error(ZC_ERR_INVALID_ARGUMENT,
                path + ": invalid JSON at " + sdk::json::line_col(text, r.offset) + " (" + r.message() + ")");
  auto v = d.IsObject() ? d.FindMember("version") : d.MemberEnd();
  if (!d.IsObject() || v == d.MemberEnd() || !v->value.IsInt() || v->value.GetInt() < 1 ||
      v->value.GetInt() > kTrainedMarkerVersion)
    throw Error(ZC_ERR_INVALID_ARGUMENT,
                path + ": \"version\": expected 1.." + std::to_string(kTrainedMarkerVersion) +
                    " (written by zcode-host tokenizer train), found " +
                    (d.IsObject() && v != d.MemberEnd() ? sdk::describe_json(v->value) : "none"));
  return v->value.GetInt();
}

std::string identity_sha256(const std::vector<std::string>& files, const std::string& extra) {
  EVP_MD_CTX* ctx = EVP_MD_CTX_new();
  if (!ctx) throw Error(ZC_ERR_OUT_OF_MEMORY, "identity: EVP_MD_CTX_new failed");
  struct Free {
    EVP_MD_CTX* c;
    ~Free() { EVP_MD_CTX_free(c); }
  } guard{ctx};
  EVP_DigestInit_ex(ctx, EVP_sha256(), nullptr);
  std::vector<char> buf(1 << 16);
  for (const std::string& f : files) {
    std::string name = fs::path(f).filename().string();
    EVP_DigestUpdate(ctx, name.data(), name.size() + 1);
    std::ifstream in(f, std::ios::binary);
    if (!in) throw Error(ZC_ERR_IO, f + ": cannot open file");
    while (in) {
      in.read(buf.data(), static_cast<std::streamsize>(buf.size()));
      EVP_DigestUpdate(ctx, buf.data(), static_cast<size_t>(in.gcount()));
    }
  }
  EVP_DigestUpdate(ctx, extra.data(), extra.size());
  unsigned char md[EVP_MAX_MD_SIZE];
  unsigned int len = 0;
  EVP_DigestFinal_ex(ctx, md, &len);
  static const char* hex = "0123456789abcdef";
  std::string out;
  for (unsigned i = 0; i < len; ++i) {
    out += hex[md[i] >> 4];
    out += hex[md[i] & 15];
  }
  return out;
}

}  // namespace zcode::tok
