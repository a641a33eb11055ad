// bench/dataloader: tokens/s of the jsonl loader from raw JSONL to packed
// batches, cold (tokenize + write the token cache) and warm (memmap only),
// on the fortunes corpus repeated to >= 200 MB. The peer, measured in the
// same run through the same plugin ABI, is the tokenizer's own encode
// throughput over the same documents; the ratio cold / tokenizer is printed
// last.
//
//   dataloader_bench [--mb 200] [--tokenizer auto|bpe|bytes] [--corpus FILE]
//                    [--dir DIR] [--seq 1024] [--batch 8]
// bpe = the bpe plugin with hf://gpt2 (auto picks it when it was built);
// bytes = the byte-level test tokenizer of tests/dataloader/harness.h.
#include "../../tests/dataloader/harness.h"

#include <zcode/core/stage_factory.h>

#include <rapidjson/document.h>

#include <chrono>
#include <cstdio>
#include <filesystem>
#include <fstream>

namespace fs = std::filesystem;
using Clock = std::chrono::steady_clock;

namespace {

double secs(Clock::time_point a, Clock::time_point b) { return std::chrono::duration<double>(b - a).count(); }

std::string make_corpus(const std::string& src, const std::string& dir, uint64_t mb) {
  fs::create_directories(dir);
  std::string out = dir + "/fortunes-" + std::to_string(mb) + "mb.jsonl";
  uint64_t want = mb * 1000000;
  std::error_code ec;
  if (fs::exists(out, ec) && fs::file_size(out) >= want) return out;
  std::string data = zt::read_file(src);
  if (data.empty()) {
    std::fprintf(stderr, "dataloader_bench: '%s' is missing or empty; run scripts/make-corpus.sh\n", src.c_str());
    std::exit(2);
  }
  std::string tmp = out + ".tmp";
  {
    std::ofstream f(tmp, std::ios::binary);
    for (uint64_t n = 0; n < want; n += data.size()) f << data;
  }
  fs::rename(tmp, out);
  return out;
}

struct Ids {
  std::vector<int32_t> v = std::vector<int32_t>(1 << 16);
  zc_ids ids{};
  static int32_t* reserve(zc_ids* s, size_t extra) {
    auto* self = static_cast<Ids*>(s->ctx);
    if (s->size + extra > self->v.size()) self->v.resize(2 * (s->size + extra));
    s->data = self->v.data();
    s->capacity = self->v.size();
    return s->data + s->size;
  }
  zc_ids* reset() {
    ids = zc_ids{v.data(), 0, v.size(), this, &reserve};
    return &ids;
  }
};

/// Iterates one epoch of the train split; returns target tokens seen.
int64_t one_epoch(zt::Loader& l) {
  int64_t tokens = 0;
  zc_batch b{};
  while (l.next_raw(b) && b.epoch == 0) tokens += b.num_target_tokens;
  return tokens;
}

}  // namespace

int main(int argc, char** argv) {
  std::string root = ZB_SOURCE_DIR;
  std::string corpus = root + "/data/fortunes/train.jsonl", dir = root + "/data/bench", tokenizer = "auto";
  uint64_t mb = 200;
  int seq = 1024, batch = 8;
  for (int i = 1; i + 1 < argc; i += 2) {
    std::string k = argv[i], v = argv[i + 1];
    if (k == "--mb") mb = std::stoull(v);
    else if (k == "--tokenizer") tokenizer = v;
    else if (k == "--corpus") corpus = v;
    else if (k == "--dir") dir = v;
    else if (k == "--seq") seq = std::stoi(v);
    else if (k == "--batch") batch = std::stoi(v);
    else {
      std::fprintf(stderr, "dataloader_bench: unknown flag %s\n", k.c_str());
      return 2;
    }
  }
#ifdef ZB_BPE_PLUGIN
  if (tokenizer == "auto") tokenizer = "bpe";
#else
  if (tokenizer == "bpe") {
    std::fprintf(stderr, "dataloader_bench: the bpe plugin was not built\n");
    return 2;
  }
  if (tokenizer == "auto") tokenizer = "bytes";
#endif
  std::string path = make_corpus(corpus, dir, mb);
  uint64_t bytes = fs::file_size(path);

  zt::FakeHost host;
  zt::Plugin jsonl(host);
  zcode::sdk::detail::g_host = &host.s;
  zc_stage_ref tok{nullptr, nullptr};
  std::string tok_name = "byte-level test tokenizer (tests/dataloader/harness.h)";
#ifdef ZB_BPE_PLUGIN
  std::unique_ptr<zt::Plugin> bpe;
  if (tokenizer == "bpe") {
    bpe = std::make_unique<zt::Plugin>(host, ZB_BPE_PLUGIN);
    const zc_create_args a = zcode::stage_args(&host.s, R"({"path":"hf://gpt2"})", "{}", "");
    void* inst = nullptr;
    zt::check(bpe->as<zc_tokenizer_table>()->create(&a, &inst));
    tok = zc_stage_ref{bpe->as<zc_tokenizer_table>(), inst};
    tok_name = "bpe plugin, hf://gpt2";
  }
#endif
  if (!tok.table) {
    const zc_create_args a = zcode::stage_args(&host.s, "{}", "{}", "");
    void* inst = nullptr;
    zt::check(zcode::sdk::detail::TokenizerThunks<zt::ByteTokenizer>::table.create(&a, &inst));
    tok = zc_stage_ref{&zcode::sdk::detail::TokenizerThunks<zt::ByteTokenizer>::table, inst};
  }
  std::printf("dataloader_bench: corpus %s (%.1f MB), tokenizer: %s, max_seq_len %d, batch_size %d\n", path.c_str(),
              bytes / 1e6, tok_name.c_str(), seq, batch);

  // Peer: the tokenizer alone, encode of every document (texts parsed first, untimed).
  std::vector<std::string> texts;
  {
    std::ifstream f(path, std::ios::binary);
    std::string line;
    rapidjson::Document d;
    while (std::getline(f, line)) {
      d.Parse(line.c_str());
      if (d.IsObject() && d.HasMember("text") && d["text"].IsString()) texts.emplace_back(d["text"].GetString());
    }
  }
  const auto* tt = static_cast<const zc_tokenizer_table*>(tok.table);
  Ids ids;
  int64_t peer_tokens = 0;
  auto p0 = Clock::now();
  for (const auto& t : texts) {
    zc_ids* o = ids.reset();
    zt::check(tt->encode(tok.instance, t.data(), t.size(), 0, o));
    peer_tokens += static_cast<int64_t>(o->size);
  }
  double peer_s = secs(p0, Clock::now());
  double peer_tps = peer_tokens / peer_s;
  texts.clear();
  texts.shrink_to_fit();
  std::printf("tokenizer alone: %lld tokens in %.2f s: %.3g tokens_per_s (%.2f MB/s of JSONL)\n",
              static_cast<long long>(peer_tokens), peer_s, peer_tps, bytes / 1e6 / peer_s);

  std::string cache = dir + "/cache";
  fs::remove_all(cache);
  std::string cfg = "{\"model\":{\"max_seq_len\":" + std::to_string(seq) + "}}";
  auto options = [&](int workers) {
    return "{\"train_path\":" + zt::jstr(path) + ",\"cache_dir\":" + zt::jstr(cache) +
           ",\"streaming\":false,\"batch_size\":" + std::to_string(batch) +
           ",\"num_workers\":" + std::to_string(workers) + "}";
  };
  // Cold: hash + read + parse + tokenize + write the cache, then one epoch.
  double cold_tps = 0;
  {
    auto c0 = Clock::now();
    zt::Loader l(jsonl, host, options(0), cfg, "train", tok);
    auto c1 = Clock::now();
    int64_t targets = one_epoch(l);
    auto c2 = Clock::now();
    double corpus_tokens = l.stats()["corpus_tokens"];
    cold_tps = corpus_tokens / secs(c0, c2);
    std::printf(
        "cold (tokenize + write cache + 1 epoch): %.0f tokens (%lld targets) in %.2f s (create %.2f s): %.3g "
        "tokens_per_s\n",
        corpus_tokens, static_cast<long long>(targets), secs(c0, c2), secs(c0, c1), cold_tps);
  }
  for (int workers : {0, 2}) {
    auto w0 = Clock::now();
    zt::Loader l(jsonl, host, options(workers), cfg, "train", tok);
    auto w1 = Clock::now();
    int64_t targets = one_epoch(l);
    auto w2 = Clock::now();
    double corpus_tokens = l.stats()["corpus_tokens"];
    std::printf(
        "warm, num_workers %d (open + verify + 1 epoch): %.2f s (open %.2f s): %.3g tokens_per_s; epoch alone %.3g "
        "tokens_per_s (%lld targets)\n",
        workers, secs(w0, w2), secs(w0, w1), corpus_tokens / secs(w0, w2), corpus_tokens / secs(w1, w2),
        static_cast<long long>(targets));
  }
  tt->destroy(tok.instance);
  for (const auto& m : host.messages(ZC_LOG_INFO)) std::printf("  log: %s\n", m.c_str());
  std::printf("ratio cold / tokenizer alone: %.3f (target >= 0.80)\n", cold_tps / peer_tps);
  return 0;
}
