// zcode._zcode: the pybind11 layer over core/ that python/zcode/__init__.py
// wraps into the guide's API (HarnessConfig, Engine, callbacks, the model and
// tokenizer). Threading: every call into core or a plugin runs with the GIL
// released; Python callbacks take it back on the engine's thread. The stages
// follow the ABI's contract (one thread at a time): an Engine is used by one
// Python thread at a time, which the Python layer does not police.
#include <zcode/core/checkpoint.h>
#include <zcode/core/config.h>
#include <zcode/core/engine.h>
#include <zcode/core/host_services.h>
#include <zcode/core/inference_model.h>
#include <zcode/core/log.h>
#include <zcode/core/registry.h>
#include <zcode/core/serve/scheduler.h>
#include <zcode/core/serve/text_stream.h>
#include <zcode/core/version.h>
#include <zcode/kernels/blas_env.h>
#include <zcode/sdk/buffers.h>
#include <zcode/sdk/stages.h>

#include <pybind11/numpy.h>
#include <pybind11/pybind11.h>
#include <pybind11/stl.h>

#include <dlfcn.h>

#include <condition_variable>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <memory>
#include <mutex>
#include <random>
#include <string>
#include <variant>
#include <vector>

namespace py = pybind11;
namespace fs = std::filesystem;
using namespace zcode;  // NOLINT: this file is the binding of core's names

namespace {

// The bundled plugins, found from this module's own file: build tree
// <build>/python/zcode/ -> <build>/lib/zcode/plugins; installed
// <prefix>/lib/python3.X/dist-packages/zcode/ -> <prefix>/lib/zcode/plugins.
std::vector<std::string> bundled_plugin_dirs() {
  Dl_info info{};
  if (!dladdr(reinterpret_cast<void*>(&bundled_plugin_dirs), &info) || !info.dli_fname) return {};
  const fs::path here = fs::path(info.dli_fname).parent_path();
  std::vector<std::string> out;
  for (const fs::path& p :
       {here / ".." / ".." / "lib" / "zcode" / "plugins", here / ".." / ".." / ".." / "zcode" / "plugins"}) {
    std::error_code ec;
    if (fs::is_directory(p, ec)) out.push_back(p.lexically_normal().string());
  }
  return out;
}

PluginSearchOptions search_options(const std::vector<std::string>& extra) {
  PluginSearchOptions o;
  for (const auto& p : extra) o.cli_paths.emplace_back(p);
  for (const auto& p : bundled_plugin_dirs()) o.cli_paths.emplace_back(p);
  return o;
}

// ---- errors: the Python layer maps these to zcode.ValidationError / RunError -------

py::object g_validation_error, g_run_error;

[[noreturn]] void raise_validation(const ConfigValidationError& e) {
  py::list errors;
  for (const auto& x : e.errors()) errors.append(py::make_tuple(x.path, x.message));
  PyErr_SetObject(g_validation_error.ptr(), py::make_tuple(std::string(e.what()), errors).ptr());
  throw py::error_already_set();
}

// ---- HarnessConfig -------------------------------------------------------------------

struct Config {
  HarnessConfig cfg;
  std::vector<std::string> plugin_paths;

  // Validates against the bundled plugins' schemas (and plugin_path).
  void validate() {
    try {
      HarnessConfig host_only = cfg;
      host_only.validate(nullptr);
      PluginSearchOptions so = search_options(plugin_paths);
      for (const auto& p : host_only.plugin_path()) so.config_paths.emplace_back(p);
      Registry reg(so);
      cfg.validate(&reg);
    } catch (const ConfigValidationError& e) {
      raise_validation(e);
    }
  }
};

Config config_from(HarnessConfig c, std::vector<std::string> plugin_paths) {
  Config k{std::move(c), std::move(plugin_paths)};
  k.validate();
  return k;
}

template <class F>
auto loading(F&& f) {
  try {
    return f();
  } catch (const ConfigValidationError& e) {
    raise_validation(e);
  } catch (const ConfigLoadError& e) {
    PyErr_SetObject(g_validation_error.ptr(), py::make_tuple(std::string(e.what()), py::list()).ptr());
    throw py::error_already_set();
  }
}

// ---- callbacks ---------------------------------------------------------------------

// A Python object with any of on_step_end(step, metrics), on_eval_end(step,
// metrics), on_checkpoint(path). An exception is logged with its traceback
// and fails the run (run() then raises RunError).
class PyObserver : public EngineObserver {
 public:
  explicit PyObserver(py::object obj) : obj_(std::move(obj)) {}
  ~PyObserver() override {
    py::gil_scoped_acquire gil;
    obj_ = py::object();
  }
  uint32_t on_event(uint32_t kind, uint64_t step, const std::string& metrics_json) override {
    const char* method = kind == ZC_EVENT_STEP_END     ? "on_step_end"
                         : kind == ZC_EVENT_EVAL_END   ? "on_eval_end"
                         : kind == ZC_EVENT_CHECKPOINT ? "on_checkpoint"
                                                       : nullptr;
    if (!method) return 0;
    py::gil_scoped_acquire gil;
    if (!py::hasattr(obj_, method)) return 0;
    try {
      py::object metrics = py::module_::import("json").attr("loads")(metrics_json);
      py::object r =
          kind == ZC_EVENT_CHECKPOINT ? obj_.attr(method)(metrics["path"]) : obj_.attr(method)(step, metrics);
      // A callback may return True to stop the run (as a plugin's REQUEST_STOP).
      return py::isinstance<py::bool_>(r) && r.cast<bool>() ? ZC_CALLBACK_REQUEST_STOP : 0;
    } catch (py::error_already_set& e) {
      std::string tb;
      try {
        py::object lines = py::module_::import("traceback").attr("format_exception")(e.type(), e.value(), e.trace());
        for (auto l : lines) tb += l.cast<std::string>();
      } catch (...) {
        tb = e.what();
      }
      const std::string who = py::repr(obj_).cast<std::string>();
      log::error("Python callback " + who + "." + method + " raised:\n" + tb);
      std::string last = e.what();
      throw std::runtime_error("Python callback " + who + "." + method + " raised " + last.substr(0, last.find('\n')));
    }
  }

 private:
  py::object obj_;
};

// ---- the model and tokenizer of a run or a checkpoint -------------------------------

// A stage borrowed from an owner (an Engine or an InferenceModel) that the
// Python object keeps alive through `owner`.
struct StageView {
  zc_stage_ref ref{};
  py::object owner;
};

const DLTensor* tensor_of(const zc_param& p, bool grad) { return grad ? p.grad : p.value; }

py::dict param_arrays(const StageView& m, bool grads) {
  const auto* t = static_cast<const zc_model_table*>(m.ref.table);
  zc_param_list list{};
  StatusPtr st(t->params(m.ref.instance, &list));
  if (st) throw std::runtime_error(std::string("model params: ") + status_message(st.get()));
  py::dict out;
  for (size_t i = 0; i < list.count; ++i) {
    const DLTensor* d = tensor_of(list.params[i], grads);
    if (!d || !d->data) continue;
    if (d->dtype.code != kDLFloat || d->dtype.bits != 32 || d->device.device_type != kDLCPU)
      throw std::runtime_error(std::string("parameter ") + list.params[i].name + " is not a float32 CPU tensor");
    std::vector<py::ssize_t> shape(d->shape, d->shape + d->ndim);
    // No copy: the array's memory is the plugin's buffer; `owner` keeps it alive.
    out[py::str(list.params[i].name)] = py::array(
        py::dtype::of<float>(), shape, {}, static_cast<float*>(d->data) + d->byte_offset / sizeof(float), m.owner);
  }
  return out;
}

py::dict param_addresses(const StageView& m) {
  const auto* t = static_cast<const zc_model_table*>(m.ref.table);
  zc_param_list list{};
  StatusPtr st(t->params(m.ref.instance, &list));
  if (st) throw std::runtime_error(std::string("model params: ") + status_message(st.get()));
  py::dict out;
  for (size_t i = 0; i < list.count; ++i)
    out[py::str(list.params[i].name)] = reinterpret_cast<uintptr_t>(list.params[i].value->data);
  return out;
}

py::array_t<float> forward_logprobs(const StageView& m,
                                    py::array_t<int32_t, py::array::c_style | py::array::forcecast> ids,
                                    py::object targets_in) {
  if (ids.ndim() != 2) throw py::value_error("forward_logprobs: ids must be int [batch, seq]");
  const int64_t B = ids.shape(0), T = ids.shape(1);
  std::vector<int32_t> in(ids.data(), ids.data() + B * T), tg(static_cast<size_t>(B * T), -1);
  if (targets_in.is_none()) {
    for (int64_t b = 0; b < B; ++b)
      for (int64_t t = 0; t + 1 < T; ++t) tg[b * T + t] = in[b * T + t + 1];
  } else {
    auto tgt = targets_in.cast<py::array_t<int32_t, py::array::c_style | py::array::forcecast>>();
    if (tgt.ndim() != 2 || tgt.shape(0) != B || tgt.shape(1) != T)
      throw py::value_error("forward_logprobs: targets must have the shape of ids");
    std::copy(tgt.data(), tgt.data() + B * T, tg.begin());
  }
  py::array_t<float> out({B, T});
  std::vector<int64_t> shape = {B, T};
  zc_batch batch{};
  batch.struct_size = sizeof batch;
  batch.input_ids = zcode::sdk::make_view(in.data(), zcode::sdk::kI32, 2, shape.data());
  batch.targets = zcode::sdk::make_view(tg.data(), zcode::sdk::kI32, 2, shape.data());
  DLTensor o = zcode::sdk::make_view(out.mutable_data(), zcode::sdk::kF32, 2, shape.data());
  const auto* t = static_cast<const zc_model_table*>(m.ref.table);
  zc_status* st = nullptr;
  {
    py::gil_scoped_release nogil;
    st = t->forward_logprobs(m.ref.instance, &batch, &o);
  }
  StatusPtr sp(st);
  if (sp) throw std::runtime_error(std::string("forward_logprobs: ") + status_message(sp.get()));
  return out;
}

// The SDK's tokenizer reference (its errors throw, and pybind11 raises them
// as RuntimeError once the GIL is back).
sdk::TokenizerRef tokenizer_of(const StageView& tk) { return sdk::TokenizerRef(process_host_services(), tk.ref); }

std::vector<std::vector<int32_t>> encode(const StageView& tk, const std::vector<std::string>& texts) {
  const sdk::TokenizerRef t = tokenizer_of(tk);
  std::vector<std::vector<int32_t>> out;
  py::gil_scoped_release nogil;
  for (const auto& s : texts) out.push_back(t.encode(s));
  return out;
}

std::vector<py::bytes> decode(const StageView& tk, const std::vector<std::vector<int32_t>>& seqs) {
  const sdk::TokenizerRef t = tokenizer_of(tk);
  std::vector<std::string> texts;
  {
    py::gil_scoped_release nogil;
    for (const auto& s : seqs) texts.push_back(t.decode(s));
  }
  return std::vector<py::bytes>(texts.begin(), texts.end());
}

// ---- Engine --------------------------------------------------------------------------

// The training engine, and for generation a loaded checkpoint with its
// scheduler (the server's), kept warm across generate() calls.
struct PyEngine {
  Config config;
  std::string checkpoint;  // Engine.from_checkpoint's, or "" (then the run's latest)
  std::unique_ptr<Engine> engine;
  std::vector<std::unique_ptr<PyObserver>> observers;
  std::unique_ptr<InferenceModel> inference;
  std::unique_ptr<serve::Scheduler> scheduler;
  std::string inference_dir;

  EngineOptions options(const std::string& resume_from) const {
    EngineOptions o;
    o.plugin_paths = config.plugin_paths;
    for (const auto& p : bundled_plugin_dirs()) o.plugin_paths.push_back(p);
    o.resume_from = resume_from;
    o.config_path = config.cfg.origin();
    o.install_signal_handlers = true;  // Ctrl-C stops training cleanly, as on the CLI
    return o;
  }

  int run(bool overwrite) {
    auto o = options(checkpoint);
    o.overwrite = overwrite;
    engine = std::make_unique<Engine>(config.cfg, o);
    for (auto& ob : observers) engine->add_observer(ob.get());
    py::gil_scoped_release nogil;
    return engine->run();
  }

  std::string resolved_checkpoint(const std::string& which) const {
    const fs::path run_dir = fs::path(config.cfg.logging().output_dir) / config.cfg.experiment_name();
    const std::string spec = !which.empty() ? which : !checkpoint.empty() ? checkpoint : "latest";
    return ckpt::resolve(spec, run_dir).string();
  }

  py::dict evaluate(const std::string& split, const std::string& which) {
    Engine e(config.cfg, options(""));
    std::vector<std::pair<std::string, double>> metrics;
    int rc = 0;
    const std::string dir = resolved_checkpoint(which);
    {
      py::gil_scoped_release nogil;
      rc = e.evaluate(dir, split, "", &metrics);
    }
    if (rc != 0) {
      PyErr_SetObject(g_run_error.ptr(), py::make_tuple(rc, "evaluate failed (see the log above)").ptr());
      throw py::error_already_set();
    }
    py::dict d;
    for (const auto& [k, v] : metrics) d[py::str(k)] = v;
    return d;
  }

  void ensure_inference(const std::string& which) {
    const std::string dir = resolved_checkpoint(which);
    if (inference && inference_dir == dir) return;
    scheduler.reset();
    inference.reset();
    InferenceSource src;
    src.checkpoint = dir;
    src.plugin_paths = config.plugin_paths;
    for (const auto& p : bundled_plugin_dirs()) src.plugin_paths.push_back(p);
    inference = std::make_unique<InferenceModel>(src);
    serve::SchedulerOptions so;
    so.slots = 32;
    so.max_queue = 1 << 20;
    scheduler = std::make_unique<serve::Scheduler>(*inference, so);
    inference_dir = dir;
  }

  // One sequence's result, filled on the scheduler's thread.
  struct Collect : serve::SequenceSink {
    std::mutex m;
    std::condition_variable cv;
    const InferenceModel* model = nullptr;
    serve::TextStream text;
    std::vector<int32_t> ids;
    std::string finish, error;
    bool done = false;
    bool on_token(const serve::TokenEvent& t) override {
      ids.push_back(t.id);
      bool stopped = false;
      text.push(model->decode(ids), &stopped);  // the scheduler's thread owns the tokenizer here
      return !stopped;
    }
    void on_finish(serve::FinishReason r, const std::string& e) override {
      if (r != serve::FinishReason::kError) text.finish(model->decode(ids));
      std::lock_guard<std::mutex> lk(m);
      finish = serve::finish_reason_name(r);
      error = e;
      done = true;
      cv.notify_all();
    }
  };

  py::list generate(const std::vector<std::variant<std::string, std::vector<int32_t>>>& prompts,
                    const serve::SamplingParams& p, const std::vector<std::string>& stop, const std::string& which) {
    ensure_inference(which);
    std::vector<std::shared_ptr<Collect>> outs;
    std::vector<serve::SequenceRequest> seqs;
    // As gen::generate (zcode-host generate) does: max_new_tokens clamped to
    // the context less one, and a prompt too long for the rest keeps its last
    // tokens, each with a warning, so that a call the CLI accepts runs here too.
    const int32_t context = scheduler->options().max_len;
    serve::SamplingParams params = p;
    if (params.max_new_tokens > context - 1) {
      log::warn("generate: max_new_tokens " + std::to_string(params.max_new_tokens) + " clamped to " +
                std::to_string(context - 1) + " (the model's context is " + std::to_string(context) + " tokens)");
      params.max_new_tokens = context - 1;
    }
    const size_t room = static_cast<size_t>(context - std::max(params.max_new_tokens, 0));
    for (const auto& prompt : prompts) {
      serve::SequenceRequest s;
      if (const auto* text = std::get_if<std::string>(&prompt)) s.prompt = inference->encode(*text);
      else s.prompt = std::get<std::vector<int32_t>>(prompt);
      if (s.prompt.empty()) {
        const int32_t start = inference->bos_id() >= 0 ? inference->bos_id() : inference->eos_id();
        if (start < 0) throw py::value_error("generate: empty prompt and the tokenizer has no <bos>");
        s.prompt.push_back(start);
      }
      if (s.prompt.size() > room) {
        log::warn("generate: the prompt's " + std::to_string(s.prompt.size()) + " tokens keep their last " +
                  std::to_string(room) + " (context " + std::to_string(context) + " less max_new_tokens " +
                  std::to_string(params.max_new_tokens) + ")");
        s.prompt.erase(s.prompt.begin(), s.prompt.end() - static_cast<std::ptrdiff_t>(room));
      }
      s.params = params;
      auto c = std::make_shared<Collect>();
      c->model = inference.get();
      c->text = serve::TextStream(stop);
      s.sink = c;
      outs.push_back(c);
      seqs.push_back(std::move(s));
    }
    {
      py::gil_scoped_release nogil;
      try {
        if (!scheduler->submit(std::move(seqs))) throw std::runtime_error("generate: the scheduler refused the batch");
      } catch (const std::invalid_argument& e) {
        py::gil_scoped_acquire gil;
        throw py::value_error(std::string("generate: ") + e.what());
      }
      for (auto& c : outs) {
        std::unique_lock<std::mutex> lk(c->m);
        c->cv.wait(lk, [&] { return c->done; });
      }
    }
    py::list out;
    for (auto& c : outs) {
      if (c->finish == "error") throw std::runtime_error("generate: " + c->error);
      py::dict d;
      d["text"] = py::bytes(c->text.text());
      d["ids"] = c->ids;
      d["finish_reason"] = c->finish;
      out.append(d);
    }
    return out;
  }
};

}  // namespace

PYBIND11_MODULE(_zcode, m) {
  m.doc() = "ZCode's C++ core (use the zcode package, not this module)";
  m.def("_set_errors", [](py::object validation, py::object run) {
    g_validation_error = std::move(validation);
    g_run_error = std::move(run);
  });
  // OpenBLAS reads OPENBLAS_CORETYPE once, when it loads: set ZCode's choice
  // now, before a plugin pulls OpenBLAS in (zcode/kernels/blas_env.h), and
  // tell the Python layer whether OpenBLAS was already in the process (NumPy
  // imported first), when the choice comes too late.
  m.def("prepare_blas", [] {
    bool loaded = false;
    if (std::FILE* f = std::fopen("/proc/self/maps", "r")) {
      char line[4096];
      while (!loaded && std::fgets(line, sizeof line, f)) loaded = std::strstr(line, "libopenblas") != nullptr;
      std::fclose(f);
    }
    const auto env = kernels::prepare_blas_environment();
#ifdef ZCODE_OPENBLAS_OPENMP_DIR
    // The plugins' OpenBLAS is the OpenMP build (their RUNPATH); Debian's
    // default libopenblas.so.0 is the pthread one, which NumPy pulls in, and
    // a library of that SONAME loaded first is the one every later user gets.
    // Loading ours now makes NumPy and the plugins share the OpenMP build.
    if (!loaded) dlopen(ZCODE_OPENBLAS_OPENMP_DIR "/libopenblas.so.0", RTLD_NOW | RTLD_GLOBAL);
#endif
    return py::make_tuple(loaded && env.set_here, env.description);
  });
  m.def("version", [] { return std::string(version_string()); });
  m.def("version_text", &version_text);
  m.def("bundled_plugin_dirs", &bundled_plugin_dirs);
  m.def("set_console_level", [](const std::string& level) {
    const auto l = log::parse_level(level);
    if (!l) throw py::value_error("console level '" + level + "' is not one of DEBUG, INFO, WARNING, ERROR");
    log::set_console_level(*l);
  });

  py::class_<Config>(m, "_Config")
      .def_static("from_file",
                  [](const std::string& path, std::vector<std::string> plugin_paths) {
                    log::info("Loading config from " + path);  // as zcode-host run says it
                    return loading([&] { return config_from(HarnessConfig::from_file(path), plugin_paths); });
                  })
      .def_static("from_text",
                  [](const std::string& text, const std::string& origin, std::vector<std::string> plugin_paths) {
                    return loading([&] { return config_from(HarnessConfig::from_string(text, origin), plugin_paths); });
                  })
      .def_static("from_checkpoint",
                  [](const std::string& dir, std::vector<std::string> plugin_paths) {
                    return loading([&] {
                      const fs::path d = ckpt::resolve(dir, fs::path("."));
                      return config_from(
                          HarnessConfig::from_string(ckpt::stored_config_json(d), (d / "state.json").string()),
                          plugin_paths);
                    });
                  })
      .def("with_overrides",
           [](const Config& c, const std::vector<std::string>& sets) {
             return loading([&] {
               Config k = c;
               k.cfg.apply_overrides(sets);
               k.validate();
               return k;
             });
           })
      .def("to_json", [](const Config& c) { return c.cfg.to_json(); })
      .def("to_yaml", [](const Config& c) { return c.cfg.to_yaml(); })
      .def_property_readonly("origin", [](const Config& c) { return c.cfg.origin(); });

  py::class_<StageView>(m, "_Stage")
      .def("parameters", [](const StageView& s) { return param_arrays(s, false); })
      .def("gradients", [](const StageView& s) { return param_arrays(s, true); })
      .def("parameter_addresses", &param_addresses)
      .def("forward_logprobs", &forward_logprobs, py::arg("ids"), py::arg("targets") = py::none())
      .def("info_json",
           [](const StageView& s) {
             const char* j = nullptr;
             StatusPtr st(static_cast<const zc_model_table*>(s.ref.table)->info_json(s.ref.instance, &j));
             if (st) throw std::runtime_error(status_message(st.get()));
             return std::string(j ? j : "{}");
           })
      .def("encode", &encode)
      .def("decode", &decode);

  py::class_<serve::SamplingParams>(m, "_Sampling")
      .def(py::init<>())
      .def_readwrite("temperature", &serve::SamplingParams::temperature)
      .def_readwrite("top_k", &serve::SamplingParams::top_k)
      .def_readwrite("top_p", &serve::SamplingParams::top_p)
      .def_readwrite("seed", &serve::SamplingParams::seed)
      .def_readwrite("max_new_tokens", &serve::SamplingParams::max_new_tokens)
      .def_readwrite("presence_penalty", &serve::SamplingParams::presence_penalty)
      .def_readwrite("frequency_penalty", &serve::SamplingParams::frequency_penalty)
      .def_readwrite("logit_bias", &serve::SamplingParams::logit_bias);

  py::class_<PyEngine>(m, "_Engine")
      .def(py::init([](const Config& c, const std::string& checkpoint) {
             auto e = std::make_unique<PyEngine>();
             e->config = c;
             e->checkpoint = checkpoint;
             return e;
           }),
           py::arg("config"), py::arg("checkpoint") = "")
      .def("run", &PyEngine::run, py::arg("overwrite") = false)
      .def("add_callback", [](PyEngine& e, py::object cb) { e.observers.push_back(std::make_unique<PyObserver>(cb)); })
      .def("evaluate", &PyEngine::evaluate)
      .def("generate", &PyEngine::generate)
      .def("save_checkpoint",
           [](PyEngine& e) {
             if (!e.engine) throw std::runtime_error("save_checkpoint: nothing to save before run()");
             py::gil_scoped_release nogil;
             return e.engine->save_checkpoint().string();
           })
      .def("run_dir",
           [](const PyEngine& e) {
             return (fs::path(e.config.cfg.logging().output_dir) / e.config.cfg.experiment_name()).string();
           })
      .def("stage", [](py::object self, const std::string& which) {
        PyEngine& e = self.cast<PyEngine&>();
        StageView v;
        v.owner = self;
        if (e.engine && e.engine->model().instance) {
          v.ref = which == "model" ? e.engine->model() : e.engine->tokenizer();
        } else {
          e.ensure_inference("");
          v.ref = which == "model" ? e.inference->model().ref() : e.inference->tokenizer().ref();
        }
        return v;
      });
}
