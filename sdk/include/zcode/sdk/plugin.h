// zcode/sdk/plugin.h: turns ordinary C++ stage classes into ABI tables and
// exports the one negotiation symbol.
//
//   class Hello : public zcode::sdk::Callback { ... };
//   ZCODE_PLUGIN("hello_callback", "1.0.0", "Apache-2.0", "Says hello",
//                ZCODE_COMPONENT(Hello, "hello", "Logs each event", R"({"type":"object"})"));
//
// Every table is a constexpr object: no work runs in static constructors.
// Every thunk catches every exception (ABI rule: none crosses the boundary).
#pragma once

#include <zcode/abi.h>
#include <zcode/sdk/error.h>
#include <zcode/sdk/host.h>
#include <zcode/sdk/options.h>
#include <zcode/sdk/stages.h>

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <new>
#include <span>
#include <string>
#include <type_traits>
#include <vector>

namespace zcode::sdk {
namespace detail {

/// Host services of this plugin file, stored at negotiation. Hidden
/// visibility makes it per-plugin.
inline const zc_host_services* g_host = nullptr;

/// A status from the host for an error the plugin reports. Needs the host's
/// services, which negotiation (or create, from args->host) stores. Without
/// them no answer is safe: NULL would turn the error into success, and a
/// status the plugin made itself would reach a host that frees only what it
/// allocated. So a call before any host is a programming error (a harness
/// that skipped negotiation and passed no args->host): it prints the error
/// on stderr and aborts, in every build type, not only under assert.
inline zc_status* make_status(zc_status_code code, const std::string& msg) noexcept {
  const zc_host_services* h = g_host;
  if (!h || !h->status_create) {
    std::fprintf(stderr,
                 "zcode sdk: a plugin call failed (status %u: %s) before the host's services were set; negotiate "
                 "first or pass zc_create_args.host\n",
                 static_cast<unsigned>(code), msg.c_str());
    std::abort();
  }
  try {
    return h->status_create(h->host_ctx, code, msg.c_str());
  } catch (...) {
    return h->status_create(h->host_ctx, code, "error (message lost: out of memory)");
  }
}

/// Runs `f`, mapping every exception to a status. NULL on success.
template <class F>
zc_status* guard(F&& f) noexcept {
  try {
    f();
    return nullptr;
  } catch (StatusError& e) {
    return e.release();
  } catch (const Error& e) {
    return make_status(e.code(), e.what());
  } catch (const std::bad_alloc&) {
    return make_status(ZC_ERR_OUT_OF_MEMORY, "out of memory");
  } catch (const std::exception& e) {
    return make_status(ZC_ERR_INTERNAL, std::string("unhandled exception: ") + e.what());
  } catch (...) {
    return make_status(ZC_ERR_INTERNAL, "unhandled non-standard exception");
  }
}

template <class T>
struct Common {
  static zc_status* create(const zc_create_args* a, void** out) {
    if (a && a->host && !g_host) g_host = a->host;
    return guard([&] {
      if (!a || !out) throw Error(ZC_ERR_INVALID_ARGUMENT, "create: NULL argument");
      CreateContext ctx(a);
      T* obj = new T(ctx);
      *out = static_cast<void*>(obj);
    });
  }
  static void destroy(void* inst) {
    try {
      delete static_cast<T*>(inst);
    } catch (...) {
    }
  }
  static zc_status* save_state(void* inst, const zc_state_writer* w) {
    return guard([&] { static_cast<T*>(inst)->save_state(StateWriter(g_host, w)); });
  }
  static zc_status* load_state(void* inst, const zc_state_reader* r) {
    return guard([&] { static_cast<T*>(inst)->load_state(StateReader(r, g_host)); });
  }
};

#define ZC_SDK_COMMON(T, TABLE, KIND, VERSION)                                                        \
  {sizeof(TABLE), KIND, VERSION, 0}, &Common<T>::create, &Common<T>::destroy, &Common<T>::save_state, \
      &Common<T>::load_state

template <class T>
struct TokenizerThunks {
  static T* self(void* i) { return static_cast<T*>(i); }
  static zc_status* vocab_size(void* i, uint64_t* out) {
    return guard([&] {
      uint64_t n = self(i)->vocab_size();
      *out = n;
    });
  }
  static zc_status* encode(void* i, const char* text, size_t len, uint32_t flags, zc_ids* out) {
    return guard([&] {
      size_t before = out->size;
      try {
        IdSink sink(out);
        self(i)->encode(std::string_view(text, len), flags, sink);
      } catch (...) {
        out->size = before;  // a failing call leaves its output as it was
        throw;
      }
    });
  }
  static zc_status* decode(void* i, const int32_t* ids, size_t n, zc_bytes* out) {
    return guard([&] {
      size_t before = out->size;
      try {
        ByteSink sink(out);
        self(i)->decode(ids, n, sink);
      } catch (...) {
        out->size = before;
        throw;
      }
    });
  }
  static zc_status* token_to_id(void* i, const char* tok, size_t len, int32_t* out) {
    return guard([&] {
      int32_t id = self(i)->token_to_id(std::string_view(tok, len));
      *out = id;
    });
  }
  static zc_status* id_to_token(void* i, int32_t id, zc_bytes* out) {
    return guard([&] {
      ByteSink s(out);
      self(i)->id_to_token(id, s);
    });
  }
  static zc_status* info_json(void* i, const char** out) {
    return guard([&] { *out = self(i)->info_json().c_str(); });
  }
  static constexpr zc_tokenizer_table table = {
      ZC_SDK_COMMON(T, zc_tokenizer_table, ZC_KIND_TOKENIZER, ZC_TOKENIZER_TABLE_VERSION),
      &vocab_size,
      &encode,
      &decode,
      &token_to_id,
      &id_to_token,
      &info_json};
};

template <class T>
struct DataLoaderThunks {
  static T* self(void* i) { return static_cast<T*>(i); }
  static zc_status* next_batch(void* i, zc_batch* out, int32_t* has) {
    return guard([&] {
      zc_batch b = *out;
      b.struct_size = sizeof(zc_batch);
      bool ok = self(i)->next_batch(b);
      *out = b;
      *has = ok ? 1 : 0;
    });
  }
  static zc_status* reset(void* i) {
    return guard([&] { self(i)->reset(); });
  }
  static zc_status* stats(void* i, const zc_metrics_sink* s) {
    return guard([&] { self(i)->stats(MetricsSink(s)); });
  }
  static zc_status* provenance_json(void* i, const char** out) {
    return guard([&] { *out = self(i)->provenance_json().c_str(); });
  }
  static zc_status* set_data_shard(void* i, uint64_t rank, uint64_t size) {
    return guard([&] { self(i)->set_data_shard(rank, size); });
  }
  static constexpr zc_dataloader_table table = {
      ZC_SDK_COMMON(T, zc_dataloader_table, ZC_KIND_DATALOADER, ZC_DATALOADER_TABLE_VERSION),
      &next_batch,
      &reset,
      &stats,
      &provenance_json,
      &set_data_shard};
};

template <class T>
struct ModelThunks {
  static T* self(void* i) { return static_cast<T*>(i); }
  static zc_status* num_params(void* i, uint64_t* total, uint64_t* active) {
    return guard([&] {
      uint64_t t = 0, a = 0;
      self(i)->num_params(t, a);
      *total = t;
      *active = a;
    });
  }
  static zc_status* params(void* i, zc_param_list* out) {
    return guard([&] { *out = self(i)->params(); });
  }
  static zc_status* zero_grad(void* i) {
    return guard([&] { self(i)->zero_grad(); });
  }
  static zc_status* forward_backward(void* i, const zc_batch* b, const zc_fb_options* o, const zc_metrics_sink* m) {
    return guard([&] { self(i)->forward_backward(*b, *o, MetricsSink(m)); });
  }
  static zc_status* forward_logprobs(void* i, const zc_batch* b, DLTensor* out) {
    return guard([&] { self(i)->forward_logprobs(*b, *out); });
  }
  static zc_status* info_json(void* i, const char** out) {
    return guard([&] { *out = self(i)->info_json().c_str(); });
  }
  static zc_status* decode_begin(void* i, int32_t batch, int32_t max_len, void** out) {
    return guard([&] { *out = self(i)->decode_begin(batch, max_len); });
  }
  static zc_status* decode_step(void* i, void* s, const int32_t* tokens, float* logits) {
    return guard([&] { self(i)->decode_step(s, tokens, logits); });
  }
  static zc_status* decode_reorder(void* i, void* s, const int32_t* src) {
    return guard([&] { self(i)->decode_reorder(s, src); });
  }
  static void decode_end(void* i, void* s) {
    try {
      if (s) self(i)->decode_end(s);
    } catch (...) {
    }
  }
  static zc_status* decode_slots_begin(void* i, int32_t slots, int32_t max_len, int32_t max_tokens, void** out) {
    return guard([&] { *out = self(i)->decode_slots_begin(slots, max_len, max_tokens); });
  }
  static zc_status* decode_slots_step(void* i, void* s, int32_t n, const int32_t* slot_of, const int32_t* tokens,
                                      const uint8_t* want_logits, float* out) {
    return guard([&] { self(i)->decode_slots_step(s, n, slot_of, tokens, want_logits, out); });
  }
  static zc_status* decode_slot_reset(void* i, void* s, int32_t slot) {
    return guard([&] { self(i)->decode_slot_reset(s, slot); });
  }
  static zc_status* decode_extend(void* i, void* s, int32_t n, const int32_t* tokens, float* out) {
    return guard([&] { self(i)->decode_extend(s, n, tokens, out); });
  }
  static zc_status* forward_logits(void* i, const int32_t* tokens, int32_t n, float* out) {
    return guard([&] { self(i)->forward_logits(tokens, n, out); });
  }
  static zc_status* forward_eval(void* i, const zc_batch* b, DLTensor* lp, DLTensor* am) {
    return guard([&] { self(i)->forward_eval(*b, lp, am); });
  }
  static zc_status* activations(void* i, zc_param_list* out) {
    return guard([&] { *out = self(i)->activations(); });
  }
  static zc_status* named_activations(void* i, zc_named_tensor_list* out) {
    return guard([&] {
      if (!out) throw Error(ZC_ERR_INVALID_ARGUMENT, "named_activations: NULL out");
      if (!ZC_STRUCT_HAS_FIELD(out, zc_named_tensor_list, tensors))
        throw Error(ZC_ERR_VERSION, "named_activations: out->struct_size " + std::to_string(out->struct_size) +
                                        " is smaller than zc_named_tensor_list's first version (" +
                                        std::to_string(offsetof(zc_named_tensor_list, tensors) + sizeof(out->tensors)) +
                                        ")");
      const zc_named_tensor_list l = self(i)->named_activations();
      out->count = l.count;  // every field of version 1; struct_size stays the caller's
      out->names = l.names;
      out->tensors = l.tensors;
    });
  }
  static zc_status* estimate_memory(const zc_create_args* a, const zc_param_shape_sink* shapes,
                                    zc_memory_estimate* out) {
    if (a && a->host && !g_host) g_host = a->host;
    return guard([&] {
      if (!a || !out) throw Error(ZC_ERR_INVALID_ARGUMENT, "estimate_memory: NULL argument");
      zc_memory_estimate e = *out;
      T::estimate_memory(CreateContext(a), ParamShapeSink(shapes), e);
      *out = e;  // a failing call leaves *out untouched
    });
  }
  static constexpr zc_model_table table = {ZC_SDK_COMMON(T, zc_model_table, ZC_KIND_MODEL, ZC_MODEL_TABLE_VERSION),
                                           &num_params,
                                           &params,
                                           &zero_grad,
                                           &forward_backward,
                                           &forward_logprobs,
                                           &info_json,
                                           &decode_begin,
                                           &decode_step,
                                           &decode_reorder,
                                           &decode_end,
                                           &forward_logits,
                                           &forward_eval,
                                           &activations,
                                           &estimate_memory,
                                           &named_activations,
                                           &decode_slots_begin,
                                           &decode_slots_step,
                                           &decode_slot_reset,
                                           &decode_extend};
};

template <class T>
struct OptimizerThunks {
  static T* self(void* i) { return static_cast<T*>(i); }
  static zc_status* step(void* i, double lr, uint64_t s) {
    return guard([&] { self(i)->step(lr, s); });
  }
  static zc_status* hessian_interval(void* i, uint64_t* out) {
    return guard([&] { *out = self(i)->hessian_interval(); });
  }
  static zc_status* update_hessian(void* i, int64_t n) {
    return guard([&] { self(i)->update_hessian(n); });
  }
  static zc_status* estimate_memory(const zc_create_args* a, zc_memory_estimate* out) {
    if (a && a->host && !g_host) g_host = a->host;
    return guard([&] {
      if (!a || !out) throw Error(ZC_ERR_INVALID_ARGUMENT, "estimate_memory: NULL argument");
      // Constructing a class that does not count would allocate its state.
      if constexpr (!T::kEstimatesMemory)
        throw Error(ZC_ERR_UNSUPPORTED, "this optimizer does not estimate its memory");
      const T obj(CreateContext(a, /*estimate_only=*/true));
      const uint64_t bytes = obj.state_bytes();
      out->optimizer_state_bytes = bytes;
    });
  }
  static zc_status* shard_granularity(const zc_create_args* a, int64_t* out, size_t count) {
    if (a && a->host && !g_host) g_host = a->host;
    return guard([&] {
      if (!a || (!out && count)) throw Error(ZC_ERR_INVALID_ARGUMENT, "shard_granularity: NULL argument");
      std::vector<int64_t> g(count, 1);
      T::shard_granularity(CreateContext(a, /*estimate_only=*/true), std::span<int64_t>(g));
      std::copy(g.begin(), g.end(), out);  // a failing call leaves out untouched
    });
  }
  static constexpr zc_optimizer_table table = {
      ZC_SDK_COMMON(T, zc_optimizer_table, ZC_KIND_OPTIMIZER, ZC_OPTIMIZER_TABLE_VERSION),
      &step,
      &hessian_interval,
      &update_hessian,
      &estimate_memory,
      T::kShards ? &shard_granularity : nullptr};
};

template <class T>
struct SchedulerThunks {
  static zc_status* lr(void* i, uint64_t step, double base, double* out) {
    return guard([&] { *out = static_cast<T*>(i)->lr(step, base); });
  }
  static constexpr zc_scheduler_table table = {
      ZC_SDK_COMMON(T, zc_scheduler_table, ZC_KIND_SCHEDULER, ZC_SCHEDULER_TABLE_VERSION), &lr};
};

template <class T>
struct EvaluatorThunks {
  static zc_status* evaluate(void* i, zc_stage_ref data, const zc_metrics_sink* m) {
    return guard([&] { static_cast<T*>(i)->evaluate(DataRef(g_host, data), MetricsSink(m)); });
  }
  static constexpr zc_evaluator_table table = {
      ZC_SDK_COMMON(T, zc_evaluator_table, ZC_KIND_EVALUATOR, ZC_EVALUATOR_TABLE_VERSION), &evaluate};
};

template <class T>
struct CallbackThunks {
  static zc_status* on_event(void* i, const zc_event* e, uint32_t* flags) {
    return guard([&] {
      uint32_t f = static_cast<T*>(i)->on_event(*e);
      if (flags) *flags = f;
    });
  }
  static constexpr zc_callback_table table = {
      ZC_SDK_COMMON(T, zc_callback_table, ZC_KIND_CALLBACK, ZC_CALLBACK_TABLE_VERSION), &on_event};
};

#undef ZC_SDK_COMMON

template <class T>
constexpr const void* table_for() {
  if constexpr (std::is_base_of_v<Tokenizer, T>) return &TokenizerThunks<T>::table;
  else if constexpr (std::is_base_of_v<DataLoader, T>) return &DataLoaderThunks<T>::table;
  else if constexpr (std::is_base_of_v<Model, T>) return &ModelThunks<T>::table;
  else if constexpr (std::is_base_of_v<Optimizer, T>) return &OptimizerThunks<T>::table;
  else if constexpr (std::is_base_of_v<Scheduler, T>) return &SchedulerThunks<T>::table;
  else if constexpr (std::is_base_of_v<Evaluator, T>) return &EvaluatorThunks<T>::table;
  else if constexpr (std::is_base_of_v<Callback, T>) return &CallbackThunks<T>::table;
  else static_assert(sizeof(T) == 0, "a component class must derive from a zcode::sdk stage base");
}

/// The negotiation body shared by every plugin (see zc_negotiate_fn).
inline zc_status_code negotiate(uint32_t host_major, uint32_t /*host_minor*/, const zc_host_services* services,
                                uint32_t* out_major, uint32_t* out_minor, const zc_manifest** out_manifest,
                                const zc_manifest* manifest) noexcept {
  if (out_major) *out_major = ZC_ABI_VERSION_MAJOR;
  if (out_minor) *out_minor = ZC_ABI_VERSION_MINOR;
  if (out_manifest) *out_manifest = manifest;
  if (host_major != ZC_ABI_VERSION_MAJOR) return ZC_ERR_VERSION;
  g_host = services;
  return ZC_OK;
}

}  // namespace detail

/// One component entry for ZCODE_PLUGIN: a stage class, its config name, a
/// one-line description and the JSON Schema of its options.
template <class T>
constexpr zc_component component(const char* name, const char* description, const char* schema) {
  return zc_component{sizeof(zc_component), T::kKind, name, description, schema, detail::table_for<T>()};
}

}  // namespace zcode::sdk

#define ZCODE_COMPONENT(CLASS, NAME, DESCRIPTION, SCHEMA) ::zcode::sdk::component<CLASS>(NAME, DESCRIPTION, SCHEMA)

/// Declares the plugin's static manifest and exports the negotiation symbol.
/// Use once per plugin file, at namespace scope.
#define ZCODE_PLUGIN(NAME, VERSION, LICENSE, DESCRIPTION, ...)                                                        \
  namespace {                                                                                                         \
  constexpr zc_component zcode_plugin_components_[] = {__VA_ARGS__};                                                  \
  constexpr zc_manifest zcode_plugin_manifest_ = {                                                                    \
      sizeof(zc_manifest),                                                                                            \
      static_cast<uint32_t>(sizeof(zcode_plugin_components_) / sizeof(zcode_plugin_components_[0])),                  \
      NAME,                                                                                                           \
      VERSION,                                                                                                        \
      LICENSE,                                                                                                        \
      DESCRIPTION,                                                                                                    \
      "{}",                                                                                                           \
      zcode_plugin_components_};                                                                                      \
  }                                                                                                                   \
  extern "C" ZC_EXPORT zc_status_code zcode_plugin_negotiate(uint32_t host_major, uint32_t host_minor,                \
                                                             const zc_host_services* services, uint32_t* out_major,   \
                                                             uint32_t* out_minor, const zc_manifest** out_manifest) { \
    return ::zcode::sdk::detail::negotiate(host_major, host_minor, services, out_major, out_minor, out_manifest,      \
                                           &zcode_plugin_manifest_);                                                  \
  }
