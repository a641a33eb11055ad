// checkpoint_parts.cpp: the optimizer state of a ZeRO-1 run in parts, one
// per rank, and its index (see "Optimizer state in parts" in
// zcode/core/checkpoint.h).
#include <zcode/core/checkpoint.h>
#include <zcode/sdk/json.h>

#include <rapidjson/document.h>

#include <algorithm>
#include <cstdio>
#include <cstring>

namespace zcode::ckpt {

namespace st = zcode::sdk::safetensors;

const char* const kOptimizerIndex = "optimizer.index.json";

std::string optimizer_part_name(int rank, int parts) {
  char b[64];
  std::snprintf(b, sizeof b, "optimizer-%05d-of-%05d.safetensors", rank, parts);
  return b;
}

namespace {

void shape_json(sdk::json::Writer& w, const std::vector<int64_t>& shape) {
  w.begin_array();
  for (int64_t d : shape) w.integer(d);
  w.end_array();
}

int64_t numel_of(const std::vector<int64_t>& shape) {
  int64_t n = 1;
  for (int64_t d : shape) n *= d;
  return n;
}

std::vector<int64_t> read_shape(const rapidjson::Value& v) {
  std::vector<int64_t> s;
  if (!v.IsArray()) return s;
  for (const auto& d : v.GetArray()) s.push_back(d.IsInt64() ? d.GetInt64() : -1);
  return s;
}

std::string shape_text(const std::vector<int64_t>& s) {
  std::string t = "[";
  for (size_t i = 0; i < s.size(); ++i) t += (i ? ", " : "") + std::to_string(s[i]);
  return t + "]";
}

}  // namespace

std::string pieces_json(const std::vector<Piece>& pieces, const std::string& part_file) {
  sdk::json::Writer w;
  w.begin_object().key("part").string(part_file).key("pieces").begin_array();
  for (const Piece& p : pieces) {
    w.begin_object().key("name").string(p.name).key("dtype").string(p.dtype).key("shape");
    shape_json(w, p.shape);
    w.key("begin").integer(p.begin).key("count").integer(p.count).key("whole").boolean(p.whole);
    if (p.whole) w.key("sha256").string(p.sha256);
    w.end_object();
  }
  w.end_array().end_object();
  return w.str();
}

std::string build_part_index(const std::vector<std::string>& rank_pieces) {
  struct Src {
    std::string part;
    int64_t begin, count;
    bool whole;
    std::string sha;
    size_t rank;
  };
  struct Tensor {
    std::string dtype;
    std::vector<int64_t> shape;
    std::vector<Src> pieces;
  };
  std::map<std::string, Tensor> tensors;
  std::vector<std::string> order;  // first-seen order: rank 0's puts first
  for (size_t r = 0; r < rank_pieces.size(); ++r) {
    rapidjson::Document d;
    d.Parse(rank_pieces[r].c_str());
    if (d.HasParseError() || !d.IsObject() || !d.HasMember("part") || !d["part"].IsString() || !d.HasMember("pieces") ||
        !d["pieces"].IsArray())
      throw CheckpointError("optimizer parts: rank " + std::to_string(r) + " sent a malformed list of pieces");
    const std::string part = d["part"].GetString();
    for (const auto& p : d["pieces"].GetArray()) {
      const std::string name = p["name"].GetString();
      auto [it, fresh] = tensors.try_emplace(name);
      Tensor& t = it->second;
      const std::vector<int64_t> shape = read_shape(p["shape"]);
      if (fresh) {
        order.push_back(name);
        t.dtype = p["dtype"].GetString();
        t.shape = shape;
      } else if (t.dtype != p["dtype"].GetString() || t.shape != shape) {
        throw CheckpointError("optimizer parts: tensor '" + name + "' is " + t.dtype + " " + shape_text(t.shape) +
                              " on one rank and " + p["dtype"].GetString() + " " + shape_text(shape) + " on rank " +
                              std::to_string(r));
      }
      t.pieces.push_back(Src{part, p["begin"].GetInt64(), p["count"].GetInt64(), p["whole"].GetBool(),
                             p.HasMember("sha256") ? p["sha256"].GetString() : "", r});
    }
  }
  sdk::json::Writer w;
  w.begin_object()
      .key("format")
      .string("zcode-optimizer-parts/1")
      .key("parts")
      .integer(static_cast<int64_t>(rank_pieces.size()));
  w.key("tensors").begin_object();
  for (const std::string& name : order) {
    Tensor& t = tensors[name];
    const int64_t n = numel_of(t.shape);
    std::vector<Src> keep;
    const Src* whole = nullptr;
    for (const Src& s : t.pieces) {
      if (!s.whole) {
        keep.push_back(s);
        continue;
      }
      if (!whole) whole = &s;
      else if (whole->sha != s.sha)
        throw CheckpointError("optimizer parts: tensor '" + name + "' differs between rank " +
                              std::to_string(whole->rank) + " and rank " + std::to_string(s.rank) +
                              " (each holds it whole; they must hold the same values)");
    }
    if (whole) {
      if (!keep.empty())
        throw CheckpointError("optimizer parts: tensor '" + name + "' is put whole by rank " +
                              std::to_string(whole->rank) + " and in parts by rank " + std::to_string(keep[0].rank));
      keep.push_back(*whole);
    }
    std::sort(keep.begin(), keep.end(), [](const Src& a, const Src& b) { return a.begin < b.begin; });
    int64_t at = 0;
    for (const Src& s : keep) {
      if (s.begin != at)
        throw CheckpointError("optimizer parts: tensor '" + name + "' " + shape_text(t.shape) + ": elements [" +
                              std::to_string(std::min(at, s.begin)) + ", " + std::to_string(std::max(at, s.begin)) +
                              (s.begin > at ? ") are in no rank's part" : ") are in two ranks' parts"));
      at += s.count;
    }
    if (at != n)
      throw CheckpointError("optimizer parts: tensor '" + name + "' " + shape_text(t.shape) + ": the parts cover " +
                            std::to_string(at) + " of its " + std::to_string(n) + " elements");
    w.key(name).begin_object().key("dtype").string(t.dtype).key("shape");
    shape_json(w, t.shape);
    w.key("pieces").begin_array();
    for (const Src& s : keep)
      w.begin_object()
          .key("part")
          .string(s.part)
          .key("begin")
          .integer(s.begin)
          .key("count")
          .integer(s.count)
          .end_object();
    w.end_array().end_object();
  }
  w.end_object().end_object();
  return w.str();
}

// ---- reading ------------------------------------------------------------------

struct PartedTensors::Entry {
  std::string dtype;
  std::vector<int64_t> shape;
  struct Src {
    const st::TensorView* view;  // the part's tensor: the piece's elements, in order
    int64_t begin, count;
  };
  std::vector<Src> pieces;
  std::vector<uint8_t> assembled;  // whole() on first use
  DLTensor tensor{};
};

PartedTensors::PartedTensors(const std::string& index_json, std::map<std::string, std::unique_ptr<st::Reader>> parts,
                             const std::string& where)
    : parts_(std::move(parts)), where_(where) {
  rapidjson::Document d;
  d.Parse(index_json.c_str());
  auto fail = [&](const std::string& what) { throw CheckpointError(where_ + ": " + what); };
  if (d.HasParseError() || !d.IsObject()) fail("not a JSON object");
  if (!d.HasMember("format") || !d["format"].IsString() ||
      std::string(d["format"].GetString()) != "zcode-optimizer-parts/1")
    fail("\"format\" is not \"zcode-optimizer-parts/1\"");
  if (!d.HasMember("tensors") || !d["tensors"].IsObject()) fail("missing object \"tensors\"");
  for (auto it = d["tensors"].MemberBegin(); it != d["tensors"].MemberEnd(); ++it) {
    const std::string name = it->name.GetString();
    const rapidjson::Value& t = it->value;
    if (!t.IsObject() || !t.HasMember("dtype") || !t["dtype"].IsString() || !t.HasMember("shape") ||
        !t.HasMember("pieces") || !t["pieces"].IsArray())
      fail("tensor '" + name + "': expected {dtype, shape, pieces}");
    auto e = std::make_unique<Entry>();
    e->dtype = t["dtype"].GetString();
    e->shape = read_shape(t["shape"]);
    if (st::dtype_size(e->dtype) == 0) fail("tensor '" + name + "': unknown dtype " + e->dtype);
    const int64_t n = numel_of(e->shape);
    int64_t at = 0;
    for (const auto& p : t["pieces"].GetArray()) {
      if (!p.IsObject() || !p.HasMember("part") || !p["part"].IsString() || !p.HasMember("begin") ||
          !p["begin"].IsInt64() || !p.HasMember("count") || !p["count"].IsInt64())
        fail("tensor '" + name + "': a piece is not {part, begin, count}");
      const std::string part = p["part"].GetString();
      auto pf = parts_.find(part);
      if (pf == parts_.end()) fail("tensor '" + name + "': part " + part + " is missing from the checkpoint");
      const st::TensorView* v = pf->second->find(name);
      const int64_t begin = p["begin"].GetInt64(), count = p["count"].GetInt64();
      if (!v || v->dtype != e->dtype || v->numel() != count)
        fail("tensor '" + name + "': " + part + " does not hold its " + std::to_string(count) + " " + e->dtype +
             " elements");
      if (begin != at)
        fail("tensor '" + name + "': its pieces do not follow each other at element " + std::to_string(at));
      at += count;
      e->pieces.push_back(Entry::Src{v, begin, count});
    }
    if (at != n)
      fail("tensor '" + name + "': the pieces hold " + std::to_string(at) + " of " + std::to_string(n) + " elements");
    names_.push_back(name);
    entries_.emplace(name, std::move(e));
  }
}

PartedTensors::~PartedTensors() = default;

const DLTensor* PartedTensors::whole(const std::string& name) {
  auto it = entries_.find(name);
  if (it == entries_.end()) return nullptr;
  Entry& e = *it->second;
  if (e.assembled.empty() && numel_of(e.shape) > 0) {
    e.assembled.resize(static_cast<size_t>(numel_of(e.shape)) * st::dtype_size(e.dtype));
    size_t at = 0;
    for (const auto& p : e.pieces) {
      std::memcpy(e.assembled.data() + at, p.view->data, p.view->nbytes);
      at += p.view->nbytes;
    }
  }
  e.tensor = DLTensor{};
  e.tensor.data = e.assembled.data();
  e.tensor.device = DLDevice{kDLCPU, 0};
  e.tensor.ndim = static_cast<int32_t>(e.shape.size());
  e.tensor.dtype = st::to_dlpack(e.dtype);
  e.tensor.shape = e.shape.data();
  return &e.tensor;
}

void PartedTensors::read_slice(const std::string& name, int64_t numel, int64_t begin, DLTensor& dst) const {
  auto it = entries_.find(name);
  if (it == entries_.end()) throw CheckpointError(where_ + ": no tensor '" + name + "'");
  const Entry& e = *it->second;
  const int64_t n = numel_of(e.shape), count = sdk::numel(dst);
  if (n != numel || !sdk::same_dtype(st::to_dlpack(e.dtype), dst.dtype) || begin < 0 || count < 0 || begin + count > n)
    throw CheckpointError(where_ + ": tensor '" + name + "' is " + std::to_string(n) + " " + e.dtype +
                          " elements; asked for [" + std::to_string(begin) + ", " + std::to_string(begin + count) +
                          ") of " + std::to_string(numel) + " of another dtype or size");
  const size_t es = st::dtype_size(e.dtype);
  char* out = static_cast<char*>(dst.data) + dst.byte_offset;
  for (const auto& p : e.pieces) {
    const int64_t lo = std::max(begin, p.begin), hi = std::min(begin + count, p.begin + p.count);
    if (lo >= hi) continue;
    std::memcpy(out + static_cast<size_t>(lo - begin) * es, p.view->data + static_cast<size_t>(lo - p.begin) * es,
                static_cast<size_t>(hi - lo) * es);
  }
}

}  // namespace zcode::ckpt
