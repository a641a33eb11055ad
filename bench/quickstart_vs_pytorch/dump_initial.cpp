// quickstart_dump: writes what a `zcode-host run` of a config starts from, so
// that a PyTorch implementation can train on exactly the same inputs.
//
//   quickstart_dump CONFIG --steps N --out DIR [--set k=v]... [--plugin-path P]...
//
// It resolves the config and creates the tokenizer, the model and the train
// data loader exactly as zcode::Engine does (same registry lookup, same
// options_json per stage, same resolved config_json, same host seed), then:
//   DIR/weights.safetensors  the model's save_state tensors (its initial
//                            parameters under the names of
//                            plugins/model/glm52/README.md), fp32
//   DIR/batches.safetensors  the first N train batches: int32 input_ids,
//                            targets (and doc_ids when the loader sends them)
//                            [N, batch, seq]; int64 num_target_tokens [N]
//   DIR/model.json           the model's info_json (resolved architecture)
//                            plus "params": [{name, shape, flags}] from params()
//   DIR/config.json          the resolved config (config_json of the run)
// Every random stream is derived from the config's seed and a stream name
// (zc_host_services.derive_seed), so an Engine run of the same config and
// overrides initialises the same weights and draws the same batches; the
// bench checks this through the step-1 loss (run.py).
//
// Exit status: 0 success, 1 runtime failure, 2 usage or config error (one
// line on stderr).
#include <zcode/core/config.h>
#include <zcode/core/host_services.h>
#include <zcode/core/log.h>
#include <zcode/core/registry.h>
#include <zcode/core/stage_factory.h>
#include <zcode/sdk/safetensors.h>

#include <rapidjson/document.h>
#include <rapidjson/stringbuffer.h>
#include <rapidjson/writer.h>

#include <algorithm>
#include <cstdint>
#include <cstdio>
#include <cstring>
#include <exception>
#include <filesystem>
#include <span>
#include <string>
#include <thread>
#include <vector>

namespace {

namespace fs = std::filesystem;
namespace st = zcode::sdk::safetensors;

struct UsageError : std::runtime_error {
  using std::runtime_error::runtime_error;
};

struct Args {
  std::string config, out;
  std::vector<std::string> sets, plugin_paths;
  int64_t steps = 0;
};

Args parse_args(int argc, char** argv) {
  Args a;
  auto value = [&](int& i) -> std::string {
    if (i + 1 >= argc) throw UsageError(std::string(argv[i]) + ": missing value");
    return argv[++i];
  };
  for (int i = 1; i < argc; ++i) {
    const std::string s = argv[i];
    if (s == "--steps") {
      const std::string v = value(i);
      char* end = nullptr;
      a.steps = std::strtoll(v.c_str(), &end, 10);
      if (v.empty() || *end || a.steps < 1) throw UsageError("--steps: '" + v + "' (expected an integer >= 1)");
    } else if (s == "--out") {
      a.out = value(i);
    } else if (s == "--set") {
      a.sets.push_back(value(i));
    } else if (s == "--plugin-path") {
      a.plugin_paths.push_back(value(i));
    } else if (s == "-h" || s == "--help") {
      std::puts("quickstart_dump CONFIG --steps N --out DIR [--set k=v]... [--plugin-path P]...");
      std::exit(0);
    } else if (!s.empty() && s[0] == '-') {
      throw UsageError("unknown option '" + s + "' (see --help)");
    } else if (a.config.empty()) {
      a.config = s;
    } else {
      throw UsageError("unexpected argument '" + s + "' (one CONFIG only)");
    }
  }
  if (a.config.empty()) throw UsageError("missing CONFIG (see --help)");
  if (a.out.empty()) throw UsageError("--out: missing (the folder to write into)");
  if (a.steps < 1) throw UsageError("--steps: missing (the number of train batches to dump)");
  return a;
}

// save_state sink: tensors go to a safetensors writer, the JSON blob is kept.
struct StateCtx {
  st::Writer writer;
  std::string json;
};

zc_status* put_tensor(void* ctx, const char* name, const DLTensor* t) {
  try {
    static_cast<StateCtx*>(ctx)->writer.add(name, *t);
    return nullptr;
  } catch (const std::exception& e) {
    return zcode::make_status(ZC_ERR_INVALID_ARGUMENT, e.what());
  }
}

zc_status* put_json(void* ctx, const char* json, size_t len) {
  static_cast<StateCtx*>(ctx)->json.assign(json, len);
  return nullptr;
}

// [batch, seq] int32 tensor -> its row-major elements (checks dtype and shape).
void append_i32(const DLTensor& t, const char* what, int64_t b, int64_t s, std::vector<int32_t>& out) {
  if (t.ndim != 2 || t.shape[0] != b || t.shape[1] != s || t.dtype.code != kDLInt || t.dtype.bits != 32)
    throw std::runtime_error(std::string("next_batch: ") + what + " is not int32 [batch, seq]");
  const auto* p = static_cast<const int32_t*>(t.data) + t.byte_offset / sizeof(int32_t);
  out.insert(out.end(), p, p + b * s);
}

int run(const Args& a) {
  zcode::HarnessConfig cfg = zcode::HarnessConfig::from_file(a.config);
  if (!a.sets.empty()) cfg.apply_overrides(a.sets);
  zcode::PluginSearchOptions so;
  for (const auto& p : a.plugin_paths) so.cli_paths.emplace_back(p);
  for (const auto& p : cfg.plugin_path()) so.config_paths.emplace_back(p);
  zcode::Registry registry(so);
  cfg.validate(&registry);
  const std::string config_json = cfg.to_json();
  int threads = static_cast<int>(cfg.hardware().num_threads);
  if (threads <= 0) threads = static_cast<int>(std::max(1u, std::thread::hardware_concurrency()));
  zcode::HostServices host(cfg.seed(), threads, DLDevice{kDLCPU, 0});
  fs::create_directories(a.out);
  const std::string out_dir = fs::absolute(a.out).string();

  // The Engine's create_core_stages, in its order, with its arguments.
  const fs::path run_dir(out_dir);
  const zcode::StageFactory stages(registry, host, config_json, run_dir);
  zcode::StageInstance tokenizer =
      stages.create(ZC_KIND_TOKENIZER, cfg.data().tokenizer_type, "data.tokenizer", cfg.section_json("data.tokenizer"));
  zcode::StageInstance model = stages.create(ZC_KIND_MODEL, cfg.model().type, "model.type", cfg.section_json("model"),
                                             {.tokenizer = tokenizer.ref()});
  zcode::StageInstance train =
      stages.create(ZC_KIND_DATALOADER, cfg.data().loader, "data.loader", cfg.section_json("data"),
                    {.tokenizer = tokenizer.ref(), .split = "train"});
  const zcode::Component& mc = *model.component();
  const zcode::Component& dc = *train.component();

  // Initial weights through save_state (what model.safetensors holds).
  StateCtx state;
  zc_state_writer w{sizeof(zc_state_writer), 0, &state, &put_tensor, &put_json, nullptr};
  zcode::check_plugin_call(mc, "save_state", mc.base()->save_state(model.get(), &w));
  state.writer.set_metadata("source", "quickstart_dump: initial model state of " + a.config);
  state.writer.save(out_dir + "/weights.safetensors");

  // Architecture and parameter flags.
  const auto* mt = mc.as<zc_model_table>();
  const char* info = nullptr;
  zcode::check_plugin_call(mc, "info_json", mt->info_json(model.get(), &info));
  rapidjson::Document doc;
  doc.Parse(info ? info : "");
  if (doc.HasParseError() || !doc.IsObject()) throw std::runtime_error("model info_json is not a JSON object");
  zc_param_list params{};
  zcode::check_plugin_call(mc, "params", mt->params(model.get(), &params));
  auto& al = doc.GetAllocator();
  rapidjson::Value list(rapidjson::kArrayType);
  for (size_t i = 0; i < params.count; ++i) {
    const zc_param& p = params.params[i];
    rapidjson::Value o(rapidjson::kObjectType), shape(rapidjson::kArrayType);
    for (int32_t d = 0; d < p.value->ndim; ++d) shape.PushBack(static_cast<int64_t>(p.value->shape[d]), al);
    o.AddMember("name", rapidjson::Value(p.name, al), al);
    o.AddMember("shape", shape, al);
    o.AddMember("flags", p.flags, al);
    list.PushBack(o, al);
  }
  doc.AddMember("params", list, al);
  rapidjson::StringBuffer sb;
  rapidjson::Writer<rapidjson::StringBuffer> jw(sb);
  doc.Accept(jw);
  const std::string model_json = std::string(sb.GetString()) + "\n";
  zcode::sdk::write_file_atomic(out_dir + "/model.json", model_json);
  const std::string cfg_text = config_json + "\n";
  zcode::sdk::write_file_atomic(out_dir + "/config.json", cfg_text);

  // The first N train batches, in the order the Engine draws them.
  const auto* dt = dc.as<zc_dataloader_table>();
  std::vector<int32_t> ids, targets, docs;
  std::vector<int64_t> counts;
  int64_t B = 0, T = 0;
  bool with_docs = false;
  for (int64_t n = 0; n < a.steps; ++n) {
    zc_batch b{};
    b.struct_size = sizeof(zc_batch);
    int32_t has = 0;
    zcode::check_plugin_call(dc, "next_batch", dt->next_batch(train.get(), &b, &has));
    if (!has) throw std::runtime_error("data: the train split ended after " + std::to_string(n) + " batches");
    if (b.input_ids.ndim != 2) throw std::runtime_error("next_batch: input_ids is not [batch, seq]");
    if (n == 0) {
      B = b.input_ids.shape[0];
      T = b.input_ids.shape[1];
      with_docs = b.doc_ids.data != nullptr;
    }
    append_i32(b.input_ids, "input_ids", B, T, ids);
    append_i32(b.targets, "targets", B, T, targets);
    if (with_docs) append_i32(b.doc_ids, "doc_ids", B, T, docs);
    counts.push_back(b.num_target_tokens);
  }
  st::Writer bw;
  const int64_t shape[3] = {a.steps, B, T};
  const size_t bytes = ids.size() * sizeof(int32_t);
  bw.add("input_ids", "I32", shape, ids.data(), bytes);
  bw.add("targets", "I32", shape, targets.data(), bytes);
  if (with_docs) bw.add("doc_ids", "I32", shape, docs.data(), bytes);
  const int64_t cshape[1] = {a.steps};
  bw.add("num_target_tokens", "I64", cshape, counts.data(), counts.size() * sizeof(int64_t));
  bw.set_metadata("config", a.config);
  bw.save(out_dir + "/batches.safetensors");

  std::fprintf(stderr, "quickstart_dump: %zu parameters, %lld batches [%lld, %lld] written to %s\n", params.count,
               static_cast<long long>(a.steps), static_cast<long long>(B), static_cast<long long>(T), out_dir.c_str());
  return 0;
}

}  // namespace

int main(int argc, char** argv) {
  try {
    const Args a = parse_args(argc, argv);
    return run(a);
  } catch (const UsageError& e) {
    std::fprintf(stderr, "quickstart_dump: %s\n", e.what());
    return 2;
  } catch (const zcode::ConfigLoadError& e) {
    std::fprintf(stderr, "quickstart_dump: %s\n", e.what());
    return 2;
  } catch (const zcode::ConfigValidationError& e) {
    std::fprintf(stderr, "quickstart_dump: %s\n", e.what());
    return 2;
  } catch (const std::exception& e) {
    std::fprintf(stderr, "quickstart_dump: %s\n", e.what());
    return 1;
  }
}
