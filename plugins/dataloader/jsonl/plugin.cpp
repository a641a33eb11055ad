// plugin.cpp: the `jsonl` data loader component: options, mode choice,
// token cache build/reuse, state, stats and provenance. The pieces live in
// shard_source, jsonl_reader, token_cache, packer, batch_source, prefetch.
#include "batch_source.h"
#include "order.h"
#include "prefetch.h"
#include "schema.h"
#include "shard_source.h"
#include "token_cache.h"

#include <zcode/sdk/buffers.h>
#include <zcode/sdk/json.h>
#include <zcode/sdk/plugin.h>

#include <openssl/evp.h>
#include <rapidjson/document.h>
#include <rapidjson/stringbuffer.h>
#include <rapidjson/writer.h>

#include <chrono>
#include <cmath>
#include <condition_variable>
#include <cstdio>
#include <deque>
#include <filesystem>
#include <mutex>
#include <thread>

namespace zcode::data {
namespace {
namespace fs = std::filesystem;
using sdk::Error;

/// One mutex for every tokenizer call this plugin makes from a worker
/// thread: the ABI allows one caller per instance at a time.
std::mutex g_tokenizer_mu;

std::string json_string(const rapidjson::Value& v) {
  rapidjson::StringBuffer sb;
  rapidjson::Writer<rapidjson::StringBuffer> w(sb);
  v.Accept(w);
  return sb.GetString();
}

const std::vector<std::string>& known_keys() {
  static const std::vector<std::string> k = {"train_path",
                                             "val_path",
                                             "train_shard_pattern",
                                             "tokenizer",
                                             "loader",
                                             "batch_size",
                                             "prefetch_factor",
                                             "num_workers",
                                             "text_field",
                                             "on_bad_record",
                                             "val_fraction",
                                             "cache_dir",
                                             "cross_document_attention",
                                             "mask_document_boundary",
                                             "streaming",
                                             "streaming_threshold_bytes",
                                             "shuffle",
                                             "shuffle_block"};
  return k;
}

class JsonlLoader : public sdk::DataLoader {
 public:
  explicit JsonlLoader(const sdk::CreateContext& ctx) : host_(ctx.host()), tok_(ctx.tokenizer()) {
    split_ = ctx.split();
    if (split_ != "train" && split_ != "val")
      throw Error(ZC_ERR_INVALID_ARGUMENT, "data: split '" + split_ + "' is not train or val");
    const sdk::Options& o = ctx.options();
    for (auto it = o.json().MemberBegin(); it != o.json().MemberEnd(); ++it) {
      std::string k(it->name.GetString(), it->name.GetStringLength());
      if (std::find(known_keys().begin(), known_keys().end(), k) == known_keys().end())
        throw Error(ZC_ERR_INVALID_ARGUMENT, "data." + k + ": unknown option for the jsonl loader");
    }
    read_options(ctx);
    if (!tok_) throw Error(ZC_ERR_INVALID_ARGUMENT, "data: the jsonl loader needs a tokenizer (data.tokenizer)");
    read_tokenizer();
    resolve_inputs(o);

    uint64_t total = 0;
    for (const auto& s : shards_) total += s.size;
    streaming_ = streaming_opt_ == "true" || (streaming_opt_ == "auto" && total > streaming_threshold_);
    counts_ = std::vector<ShardCounts>(shards_.size());

    spec_.batch = batch_size_;
    spec_.seq = seq_;
    spec_.pad = pad_id_;
    spec_.eos = eos_id_;
    spec_.doc_ids = !cross_doc_;
    spec_.mask_eos = mask_boundary_;
    spec_.finite = split_ == "val";
    spec_.shuffle = shuffle_;
    spec_.seed = host_.derive_seed(("data/" + split_).c_str());
    spec_.lengths = &lengths_;

    if (streaming_) {
      compute_key();  // no content hashes: streaming never reads a file up front
      host_.info("jsonl", "data (" + split_ + "): streaming " + std::to_string(shards_.size()) + " shard(s), " +
                              std::to_string(total) + " bytes (no token cache)");
      source_ = std::make_unique<StreamSource>(
          shards_, reader_options(), host_, spec_, shuffle_block_,
          [this](const std::string& text, std::vector<int32_t>& out) {
            std::lock_guard<std::mutex> lk(g_tokenizer_mu);
            zc_ids ids = sdk::ids_into(stream_ids_);
            tok_.encode(text, 0, &ids);
            out.assign(ids.data, ids.data + ids.size);
          },
          &counts_, &bad_logged_);
      provenance_ = build_provenance(false);
    } else {
      open_or_build_cache();
      source_ = std::make_unique<MemmapSource>(*cache_, spec_);
    }
    prefetch_ = std::make_unique<Prefetcher>(*source_, spec_, num_workers_, prefetch_factor_, host_, split_);
    shape_[0] = batch_size_;
    shape_[1] = seq_;
  }

  ~JsonlLoader() override { prefetch_.reset(); }  // joins the workers before the source goes

  bool next_batch(zc_batch& out) override {
    const BatchSlot* s = prefetch_->next();
    if (!s) return false;
    auto* self = const_cast<BatchSlot*>(s);
    out.input_ids = sdk::make_view(self->input.data(), sdk::kI32, 2, shape_);
    out.targets = sdk::make_view(self->target.data(), sdk::kI32, 2, shape_);
    out.doc_ids = sdk::make_view(spec_.doc_ids ? self->doc.data() : nullptr, sdk::kI32, 2, shape_);
    out.num_target_tokens = s->counts.target_tokens;
    out.num_target_bytes = s->counts.target_bytes;
    out.num_target_chars = s->counts.target_chars;
    out.epoch = s->epoch;
    ++batches_;
    return true;
  }

  void reset() override { prefetch_->seek(Cursor{}); }

  /// Data parallelism (ABI 1.8): this rank's batch of every `size`; the
  /// others are planned (their windows chosen, the cursor moved) but never
  /// copied. Streaming still reads and tokenizes them: the stream has no
  /// index to jump by.
  void set_data_shard(uint64_t rank, uint64_t size) override {
    if (size < 1 || rank >= size)
      throw Error(ZC_ERR_INVALID_ARGUMENT, "data (" + split_ + "): set_data_shard rank " + std::to_string(rank) +
                                               " of " + std::to_string(size) + " (expected 0 <= rank < size)");
    prefetch_->set_stride(rank, size);
  }

  void stats(const sdk::MetricsSink& m) override {
    m.put("data_wait_ms", prefetch_->take_wait_ms());
    uint64_t bad = 0;
    for (const auto& c : counts_) bad += c.skipped;
    m.put("bad_records", static_cast<double>(bad));
    m.put("epoch", static_cast<double>(prefetch_->cursor().epoch));
    m.put("batches", static_cast<double>(batches_));
    if (cache_) {
      m.put("corpus_tokens", static_cast<double>(cache_->n_tokens()));
      m.put("corpus_docs", static_cast<double>(cache_->n_docs()));
      m.put("token_cache_hit", cache_hit_ ? 1.0 : 0.0);
    }
  }

  const std::string& provenance_json() const override {
    if (streaming_) provenance_ = build_provenance(false);  // counts grow while epoch 0 streams
    return provenance_;
  }

  void save_state(const sdk::StateWriter& w) override {
    const Cursor& c = prefetch_->cursor();
    rapidjson::Document d(rapidjson::kObjectType);
    auto& a = d.GetAllocator();
    auto str = [&](const std::string& s) { return rapidjson::Value(s.c_str(), a); };
    d.AddMember("version", 1, a);
    d.AddMember("split", str(split_), a);
    d.AddMember("mode", str(streaming_ ? "streaming" : "memmap"), a);
    d.AddMember("batch_size", batch_size_, a);
    d.AddMember("max_seq_len", seq_, a);
    d.AddMember("corpus", str(corpus_id_), a);
    d.AddMember("epoch", c.epoch, a);
    d.AddMember("batch", c.batch, a);
    if (streaming_) {
      d.AddMember("block", c.block, a);
      d.AddMember("block_loaded", c.block_loaded, a);
      d.AddMember("block_used", c.block_used, a);
      rapidjson::Value pos(rapidjson::kObjectType);
      pos.AddMember("shard", c.block_start.shard, a);
      pos.AddMember("offset", c.block_start.offset, a);
      pos.AddMember("line", c.block_start.line, a);
      pos.AddMember("record", c.block_start.record, a);
      d.AddMember("block_start", pos, a);
      uint64_t n = c.carry ? c.carry->size() : 0;
      d.AddMember("carry_tokens", n, a);
      if (n > 0) {
        int64_t shape[1] = {static_cast<int64_t>(n)};
        w.put("carry", c.carry->data(), sdk::kI32, shape);
      }
    }
    w.put_json(json_string(d));
  }

  void load_state(const sdk::StateReader& r) override {
    std::string_view js = r.json();
    rapidjson::Document d;
    d.Parse(js.data(), js.size());
    auto bad = [&](const std::string& why) { throw Error(ZC_ERR_DATA, "data (" + split_ + ") state: " + why); };
    if (d.HasParseError() || !d.IsObject()) bad("not a JSON object");
    auto u64 = [&](const rapidjson::Value& o, const char* k) -> uint64_t {
      auto it = o.FindMember(k);
      if (it == o.MemberEnd() || !it->value.IsUint64()) bad(std::string("missing or non-integer \"") + k + "\"");
      return it->value.GetUint64();
    };
    auto text = [&](const char* k) -> std::string {
      auto it = d.FindMember(k);
      if (it == d.MemberEnd() || !it->value.IsString()) bad(std::string("missing \"") + k + "\"");
      return it->value.GetString();
    };
    if (u64(d, "version") != 1) bad("version " + std::to_string(u64(d, "version")) + ", expected 1");
    std::string mode = text("mode");
    if (mode != (streaming_ ? "streaming" : "memmap"))
      bad("saved in " + mode + " mode, but this run is in " + (streaming_ ? "streaming" : "memmap") +
          " mode (set data.streaming to match)");
    if (u64(d, "batch_size") != static_cast<uint64_t>(batch_size_) ||
        u64(d, "max_seq_len") != static_cast<uint64_t>(seq_))
      bad("saved with batch_size " + std::to_string(u64(d, "batch_size")) + " and max_seq_len " +
          std::to_string(u64(d, "max_seq_len")) + "; this run has " + std::to_string(batch_size_) + " and " +
          std::to_string(seq_));
    if (text("corpus") != corpus_id_)
      bad("saved for a different corpus (data files, tokenizer or split settings changed): " + text("corpus") +
          ", now " + corpus_id_);
    Cursor c;
    c.epoch = u64(d, "epoch");
    c.batch = u64(d, "batch");
    if (streaming_) {
      c.block = u64(d, "block");
      c.block_used = u64(d, "block_used");
      auto bl = d.FindMember("block_loaded");
      if (bl == d.MemberEnd() || !bl->value.IsBool()) bad("missing \"block_loaded\"");
      c.block_loaded = bl->value.GetBool();
      auto p = d.FindMember("block_start");
      if (p == d.MemberEnd() || !p->value.IsObject()) bad("missing \"block_start\"");
      c.block_start =
          ReaderPos{u64(p->value, "shard"), u64(p->value, "offset"), u64(p->value, "line"), u64(p->value, "record")};
      if (c.block_start.shard > shards_.size()) bad("shard index out of range");
      uint64_t n = u64(d, "carry_tokens");
      auto carry = std::make_shared<std::vector<int32_t>>(n);
      if (n > 0) r.copy_to("carry", carry->data(), sdk::kI32, static_cast<int64_t>(n));
      c.carry = std::move(carry);
    }
    prefetch_->seek(c);
  }

 private:
  void read_options(const sdk::CreateContext& ctx) {
    const sdk::Options& o = ctx.options();
    batch_size_ = o.get<int32_t>("batch_size", 8);
    if (split_ == "val") batch_size_ = ctx.config().object("evaluation").get<int32_t>("batch_size", batch_size_);
    if (batch_size_ < 1)
      throw Error(ZC_ERR_INVALID_ARGUMENT, "data.batch_size: " + std::to_string(batch_size_) + ", expected >= 1");
    prefetch_factor_ = o.get<int32_t>("prefetch_factor", 2);
    if (prefetch_factor_ < 1)
      throw Error(ZC_ERR_INVALID_ARGUMENT,
                  "data.prefetch_factor: " + std::to_string(prefetch_factor_) + ", expected >= 1");
    num_workers_ = o.get<int32_t>("num_workers", 1);
    if (num_workers_ < 0 || num_workers_ > 256)
      throw Error(ZC_ERR_INVALID_ARGUMENT, "data.num_workers: " + std::to_string(num_workers_) + ", expected 0..256");
    text_field_ = o.get<std::string>("text_field", "text");
    std::string bad = o.get<std::string>("on_bad_record", "error");
    if (bad != "error" && bad != "skip")
      throw Error(ZC_ERR_INVALID_ARGUMENT, "data.on_bad_record: '" + bad + "', expected error or skip");
    skip_bad_ = bad == "skip";
    val_fraction_ = o.get<double>("val_fraction", 0.0);
    if (!(val_fraction_ >= 0.0 && val_fraction_ < 1.0))
      throw Error(ZC_ERR_INVALID_ARGUMENT,
                  "data.val_fraction: " + std::to_string(val_fraction_) + ", expected 0 <= x < 1");
    cache_dir_ = o.get<std::string>("cache_dir", "");
    cross_doc_ = o.get<bool>("cross_document_attention", true);
    mask_boundary_ = o.get<bool>("mask_document_boundary", false);
    shuffle_ = o.get<bool>("shuffle", true);
    shuffle_block_ = o.get<uint64_t>("shuffle_block", 1024);
    if (shuffle_block_ < 1) throw Error(ZC_ERR_INVALID_ARGUMENT, "data.shuffle_block: 0, expected >= 1");
    streaming_threshold_ = o.get<uint64_t>("streaming_threshold_bytes", uint64_t(64) << 30);
    if (o.has("streaming")) {
      const rapidjson::Value& v = o.json()["streaming"];
      if (v.IsBool()) streaming_opt_ = v.GetBool() ? "true" : "false";
      else if (v.IsString() && std::string(v.GetString()) == "auto") streaming_opt_ = "auto";
      else if (!v.IsNull())
        throw Error(ZC_ERR_INVALID_ARGUMENT,
                    "data.streaming: " + sdk::describe_json(v) + ", expected true, false or \"auto\"");
    }
    seq_ = ctx.config().object("model").get<int32_t>("max_seq_len", 0);
    if (seq_ < 1)
      throw Error(ZC_ERR_INVALID_ARGUMENT,
                  "model.max_seq_len: missing or < 1 (the jsonl loader cuts windows of max_seq_len + 1 tokens)");
  }

  void read_tokenizer() {
    vocab_ = tok_.vocab_size();
    std::string info = tok_.info_json();
    rapidjson::Document d;
    d.Parse(info.c_str());
    if (d.HasParseError() || !d.IsObject())
      throw Error(ZC_ERR_INVALID_ARGUMENT, "data: tokenizer info_json is not a JSON object");
    auto id = [&](const char* k) -> int32_t {
      auto it = d.FindMember(k);
      if (it == d.MemberEnd() || !it->value.IsInt())
        throw Error(ZC_ERR_INVALID_ARGUMENT, std::string("data: tokenizer info_json has no integer \"") + k +
                                                 "\" (the loader needs it for packing)");
      return it->value.GetInt();
    };
    pad_id_ = id("pad_id");
    eos_id_ = id("eos_id");
    if (pad_id_ < 0 || eos_id_ < 0 || static_cast<uint64_t>(pad_id_) >= vocab_ ||
        static_cast<uint64_t>(eos_id_) >= vocab_)
      throw Error(ZC_ERR_INVALID_ARGUMENT, "data: tokenizer pad_id/eos_id outside the vocab");
    auto ident = d.FindMember("identity");
    if (ident != d.MemberEnd() && ident->value.IsString() && ident->value.GetStringLength() > 0) {
      tok_identity_ = ident->value.GetString();
    } else {
      tok_identity_ = "info:" + info;  // no identity: the whole description keys the cache
      host_.warn("jsonl", "tokenizer info_json has no \"identity\"; the token cache is keyed by its whole info_json");
    }
    std::vector<int32_t> specials = {pad_id_, eos_id_};
    auto sp = d.FindMember("specials");
    if (sp != d.MemberEnd() && sp->value.IsObject())
      for (auto it = sp->value.MemberBegin(); it != sp->value.MemberEnd(); ++it)
        if (it->value.IsInt()) specials.push_back(it->value.GetInt());
    for (const char* k : {"bos_id", "mask_id"}) {
      auto it = d.FindMember(k);
      if (it != d.MemberEnd() && it->value.IsInt()) specials.push_back(it->value.GetInt());
    }
    // Unassigned ids the tokenizer declares (tokenizer_common's Specials);
    // without the list, build() finds them by their failing decode.
    std::vector<std::pair<uint64_t, uint64_t>> unassigned;
    if (auto u = d.FindMember("unassigned_ids"); u != d.MemberEnd() && u->value.IsArray())
      for (const auto& r : u->value.GetArray())
        if (r.IsArray() && r.Size() == 2 && r[0].IsUint64() && r[1].IsUint64())
          unassigned.emplace_back(r[0].GetUint64(), r[1].GetUint64());
    lengths_ = TokenLengths::build(tok_, vocab_, specials, unassigned);
    if (lengths_.unassigned > 0)
      host_.info("jsonl", "data (" + split_ + "): " + std::to_string(lengths_.unassigned) + " of the tokenizer's " +
                              std::to_string(vocab_) + " ids are unassigned (no token; they never occur in the data)");
  }

  void resolve_inputs(const sdk::Options& o) {
    std::string val_path = o.get<std::string>("val_path", "");
    std::string pattern = o.get<std::string>("train_shard_pattern", "");
    if (!val_path.empty() && val_fraction_ > 0)
      throw Error(ZC_ERR_INVALID_ARGUMENT, "data.val_fraction: " + std::to_string(val_fraction_) +
                                               " is set together with data.val_path; use one of them");
    filter_ = SplitFilter::kAll;
    if (split_ == "val" && !val_path.empty()) {
      option_ = "data.val_path";
      shards_ = resolve_shards(val_path, "", option_);
      return;
    }
    if (split_ == "val" && val_fraction_ <= 0)
      throw Error(ZC_ERR_INVALID_ARGUMENT,
                  "data.val_path: not set and data.val_fraction is 0, so there is no validation split");
    option_ = "data.train_path";
    shards_ = resolve_shards(o.require<std::string>("train_path"), pattern, option_);
    if (val_fraction_ > 0) filter_ = split_ == "val" ? SplitFilter::kValOnly : SplitFilter::kTrainOnly;
  }

  DocReader::Options reader_options() const {
    DocReader::Options r;
    r.text_field = text_field_;
    r.skip_bad = skip_bad_;
    r.filter = filter_;
    r.val_fraction = val_fraction_;
    r.option = option_;
    return r;
  }

  /// SHA-256 over everything the token stream depends on: the files (path,
  /// size, mtime, content SHA-256), the tokenizer identity, and the split
  /// and record settings. max_seq_len is not in it: windows are cut when
  /// read, so one cache serves every sequence length.
  void compute_key() {
    std::string k = "zcode-token-cache/" + std::to_string(kCacheVersion) + "\n";
    char buf[64];
    std::snprintf(buf, sizeof buf, "%.17g", val_fraction_);
    k += "split=" + split_ + " filter=" + std::to_string(static_cast<int>(filter_)) + " val_fraction=" + buf +
         " text_field=" + text_field_ + " on_bad_record=" + (skip_bad_ ? "skip" : "error") +
         " token_bytes=" + std::to_string(token_bytes()) + " eos=" + std::to_string(eos_id_) + "\n";
    k += "tokenizer=" + tok_identity_ + "\n";
    for (size_t i = 0; i < shards_.size(); ++i) {
      const Shard& s = shards_[i];
      k += fs::absolute(s.path).lexically_normal().string() + "\t" + std::to_string(s.size) + "\t" +
           std::to_string(s.mtime_ns) + "\t" + (i < shard_sha_.size() ? shard_sha_[i] : "-") + "\n";
    }
    unsigned int len = 0;
    EVP_Digest(k.data(), k.size(), key_, &len, EVP_sha256(), nullptr);
    corpus_id_ = to_hex(key_, 32);
  }

  uint32_t token_bytes() const { return vocab_ <= 65536 ? 2 : 4; }

  std::string cache_path() const {
    fs::path dir = cache_dir_.empty() ? fs::current_path() / ".cache" / "zcode" / "tokens" : fs::path(cache_dir_);
    return (dir / (corpus_id_ + ".zctok")).string();
  }

  std::string build_provenance(bool with_sha) const {
    rapidjson::Document d(rapidjson::kArrayType);
    auto& a = d.GetAllocator();
    for (size_t i = 0; i < shards_.size(); ++i) {
      rapidjson::Value e(rapidjson::kObjectType);
      e.AddMember("path", rapidjson::Value(shards_[i].path.c_str(), a), a);
      if (with_sha) e.AddMember("sha256", rapidjson::Value(shard_sha_[i].c_str(), a), a);
      else e.AddMember("sha256", rapidjson::Value(), a);  // streaming: not hashed up front
      e.AddMember("bytes", shards_[i].size, a);
      e.AddMember("records", counts_[i].records.load(), a);
      e.AddMember("skipped", counts_[i].skipped.load(), a);
      e.AddMember("license", "unknown", a);
      d.PushBack(e, a);
    }
    return json_string(d);
  }

  void open_or_build_cache() {
    for (const auto& s : shards_) shard_sha_.push_back(sha256_file(s.path));
    compute_key();
    std::string path = cache_path();
    std::string why;
    cache_ = TokenCache::open(path, key_, why);
    if (cache_) {
      cache_hit_ = true;
      host_.info("jsonl", "reusing token cache " + path + " (" + std::to_string(cache_->n_tokens()) + " tokens, " +
                              std::to_string(cache_->n_docs()) + " docs)");
      load_meta(cache_->meta_json());
      return;
    }
    if (!why.empty()) host_.warn("jsonl", "token cache " + path + " is invalid (" + why + "); rebuilding it");
    build_cache(path);
    // A racing process may have renamed its own (equal) file over ours since;
    // header, size and key are still checked.
    cache_ = TokenCache::open(path, key_, why, /*verify_payload=*/false);
    if (!cache_) throw Error(ZC_ERR_IO, "token cache " + path + ": unreadable right after writing it (" + why + ")");
  }

  void load_meta(const std::string& meta) {
    rapidjson::Document d;
    (void)sdk::json::parse(d, meta);  // from a cache file: bounded; anything unreadable is ignored below
    auto it = d.IsObject() ? d.FindMember("provenance") : d.MemberEnd();
    if (it == d.MemberEnd() || !it->value.IsArray() || it->value.Size() != shards_.size()) return;
    for (rapidjson::SizeType i = 0; i < it->value.Size(); ++i) {
      const auto& e = it->value[i];
      if (e.HasMember("records") && e["records"].IsUint64()) counts_[i].records = e["records"].GetUint64();
      if (e.HasMember("skipped") && e["skipped"].IsUint64()) counts_[i].skipped = e["skipped"].GetUint64();
    }
    provenance_ = build_provenance(true);
  }

  /// Tokenizes the split into a new cache file. Reading and JSON parsing run
  /// on one helper thread, tokenization on this (the host's) thread, so the
  /// tokenizer is only ever called from the thread that called create.
  void build_cache(const std::string& path) {
    auto t0 = std::chrono::steady_clock::now();
    host_.info("jsonl", "data (" + split_ + "): tokenizing " + std::to_string(shards_.size()) +
                            " shard(s) into token cache " + path);
    struct Chunk {
      std::vector<std::string> docs;
      size_t n = 0;
    };
    std::mutex mu;
    std::condition_variable cv;
    std::deque<std::unique_ptr<Chunk>> full, empty;
    for (int i = 0; i < 4; ++i) empty.push_back(std::make_unique<Chunk>());
    bool reader_done = false, abort = false;
    std::exception_ptr reader_error;
    std::thread reader([&] {
      try {
        DocReader rd(shards_, reader_options(), host_, &counts_, &bad_logged_);
        for (bool more = true; more;) {
          std::unique_ptr<Chunk> c;
          {
            std::unique_lock<std::mutex> lk(mu);
            cv.wait(lk, [&] { return !empty.empty() || abort; });
            if (abort) return;
            c = std::move(empty.front());
            empty.pop_front();
          }
          c->n = 0;
          size_t bytes = 0;
          while (bytes < (size_t(4) << 20)) {
            if (c->n == c->docs.size()) c->docs.emplace_back();
            if (!(more = rd.next(c->docs[c->n]))) break;
            bytes += c->docs[c->n++].size();
          }
          std::lock_guard<std::mutex> lk(mu);
          full.push_back(std::move(c));
          cv.notify_all();
        }
      } catch (...) {
        std::lock_guard<std::mutex> lk(mu);
        reader_error = std::current_exception();
      }
      std::lock_guard<std::mutex> lk(mu);
      reader_done = true;
      cv.notify_all();
    });
    try {
      TokenCacheWriter w(path, token_bytes(), key_);
      std::vector<int32_t> buf;  // reused for every document
      for (;;) {
        std::unique_ptr<Chunk> c;
        {
          std::unique_lock<std::mutex> lk(mu);
          cv.wait(lk, [&] { return !full.empty() || reader_done; });
          if (full.empty()) break;
          c = std::move(full.front());
          full.pop_front();
        }
        if (host_.stop_requested())
          throw Error(ZC_ERR_CANCELLED, "data: stop requested while building the token cache");
        for (size_t i = 0; i < c->n; ++i) {
          zc_ids ids = sdk::ids_into(buf);
          tok_.encode(c->docs[i], 0, &ids);
          if (ids.size > 0) w.add_doc(ids.data, ids.size, eos_id_);  // empty documents add nothing
        }
        std::lock_guard<std::mutex> lk(mu);
        empty.push_back(std::move(c));
        cv.notify_all();
      }
      reader.join();
      if (reader_error) std::rethrow_exception(reader_error);
      if (w.n_docs() == 0) {
        uint64_t skipped = 0;
        for (const auto& c : counts_) skipped += c.skipped;
        throw Error(ZC_ERR_DATA, option_ + ": no documents for the " + split_ + " split (" + std::to_string(skipped) +
                                     " bad records skipped)");
      }
      provenance_ = build_provenance(true);
      sdk::json::Writer meta;
      meta.begin_object().key("provenance").raw(provenance_).end_object();
      w.finish(meta.str());
      double s = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
      host_.info("jsonl", "token cache written: " + std::to_string(w.n_tokens()) + " tokens, " +
                              std::to_string(w.n_docs()) + " docs in " + std::to_string(s) + " s");
    } catch (...) {
      {
        std::lock_guard<std::mutex> lk(mu);
        abort = true;
        cv.notify_all();
      }
      if (reader.joinable()) reader.join();
      throw;
    }
  }

  sdk::Host host_;
  sdk::TokenizerRef tok_;
  std::string split_;
  int32_t batch_size_ = 8, prefetch_factor_ = 2, num_workers_ = 1, seq_ = 0;
  std::string text_field_, cache_dir_, streaming_opt_ = "auto", option_;
  bool skip_bad_ = false, cross_doc_ = true, mask_boundary_ = false, shuffle_ = true, streaming_ = false,
       cache_hit_ = false;
  double val_fraction_ = 0;
  uint64_t shuffle_block_ = 1024, streaming_threshold_ = 0, vocab_ = 0;
  int32_t pad_id_ = 0, eos_id_ = 0;
  std::string tok_identity_;
  SplitFilter filter_ = SplitFilter::kAll;
  std::vector<Shard> shards_;
  std::vector<std::string> shard_sha_;
  std::vector<ShardCounts> counts_;
  uint64_t bad_logged_ = 0;
  unsigned char key_[32] = {};
  std::string corpus_id_;  // memmap: cache key; streaming: shard list hash
  TokenLengths lengths_;
  PackSpec spec_;
  std::vector<int32_t> stream_ids_;  // the streaming encoder's buffer, reused
  std::unique_ptr<TokenCache> cache_;
  std::unique_ptr<BatchSource> source_;
  std::unique_ptr<Prefetcher> prefetch_;
  mutable std::string provenance_;
  int64_t shape_[2] = {0, 0};
  uint64_t batches_ = 0;
};

}  // namespace
}  // namespace zcode::data

ZCODE_PLUGIN("jsonl", "1.0.0", "Apache-2.0", "JSON Lines data loader: shards, token memmap cache, packing, workers",
             ZCODE_COMPONENT(
                 zcode::data::JsonlLoader, "jsonl",
                 "JSONL files/shards (.gz, .zst) -> packed token windows via a memory-mapped token cache or streaming",
                 zcode::data::kDataSchema))
