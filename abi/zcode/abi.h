/*
 * zcode/abi.h: the one contract between the ZCode host and its plugins.
 *
 * Pure C99, fixed-width types, enums stored as uint32_t. No C++ type crosses it.
 * Modelled on ONNX Runtime's C API (append-only tables, opaque status), DLPack
 * (tensors, ownership by deleter), Triton's backend API (lifecycle, threading
 * contract, libraries never unloaded) and Vulkan's loader (version negotiation).
 *
 * ----------------------------------------------------------------------------
 * VERSIONING
 *   ZC_ABI_VERSION_MAJOR changes on any incompatible change; the host refuses a
 *   plugin whose major differs. ZC_ABI_VERSION_MINOR grows when a slot is
 *   appended to a table or a value to an enum; the host refuses a plugin whose
 *   minor is newer than its own. Every table and every struct that crosses the
 *   boundary begins with `struct_size` (tables: {struct_size, kind,
 *   kind_version}), and a reader checks `struct_size` before it touches a slot
 *   that was appended later. Tables, structs and enums are append-only.
 *
 *   What each minor added (each slot is also marked where it is declared):
 *     1.0  the manifest, one table per kind, host services, status codes
 *     1.1  zc_model_table.forward_eval (kind_version 2);
 *          ZC_CALLBACK_REQUEST_CHECKPOINT
 *     1.2  zc_model_table.activations (kind_version 3)
 *     1.3  zc_model_table.estimate_memory (kind_version 4),
 *          zc_optimizer_table.estimate_memory (kind_version 2),
 *          zc_memory_estimate, zc_param_shape_sink
 *     1.4  zc_create_args.stream; zc_model_table.named_activations
 *          (kind_version 5), zc_named_tensor_list
 *     1.5  multi-process training: zc_collectives and
 *          zc_host_services.collectives; zc_fb_options.grads_ready;
 *          zc_create_args.shard, zc_param_shard and
 *          zc_optimizer_table.shard_granularity (kind_version 3);
 *          zc_state_writer.put_tensor_slice, zc_state_reader.read_tensor_slice
 *     1.6  serving: zc_model_table.decode_slots_begin, decode_slots_step and
 *          decode_slot_reset (kind_version 6): a KV cache of independent
 *          slots for continuous batching
 *     1.7  profiling: zc_tracer and zc_host_services.tracer (spans and
 *          counters any plugin adds to the host's trace)
 *     1.8  generation: zc_model_table.decode_extend (kind_version 7): a
 *          prompt's positions through a decode_begin session in one call;
 *          data parallelism: zc_dataloader_table.set_data_shard
 *          (kind_version 2): a rank reads only its share of the stream
 *     1.9  ZeRO-1 with expert parallelism: zc_param_shard.groups, the
 *          group of each parameter (dense tensors over DATA, experts over
 *          EXPERT_DATA)
 *
 * ERRORS
 *   Every fallible call returns `zc_status*`. NULL means success. A non-NULL
 *   status is created by the plugin through `zc_host_services.status_create`
 *   and is owned and released by the host, so the host frees only what it
 *   allocated. No exception crosses the boundary. A failing call leaves its
 *   out-parameters untouched. Every release/destroy function accepts NULL.
 *
 * TENSORS
 *   DLPack (dlpack/dlpack.h), built against DLPack 0.6 (DLPACK_VERSION 60,
 *   what Debian 12 ships): only DLTensor, DLDevice and DLDataType cross the
 *   boundary, whose layout later DLPack releases keep (pinned below); there
 *   is no versioned tensor struct in 0.6 and the ABI does not need one.
 *   Every tensor is borrowed: a `const DLTensor*` argument for the duration
 *   of the call, a tensor a call hands out for the lifetime its slot states
 *   (parameters: the model's life; activations: until the next call; a
 *   batch: until the next next_batch). No call moves ownership of a tensor,
 *   so DLManagedTensor and its deleter are not used. Only kDLCPU and kDLCUDA
 *   device types are accepted. Device work runs on an explicit stream (the
 *   instance's zc_create_args.stream since ABI 1.4, zc_host_services.stream
 *   before); there is no thread-local "current stream".
 *
 * THREADING CONTRACT
 *   - The host never calls one instance from two threads at once. Different
 *     instances may be called concurrently.
 *   - `destroy` joins every thread the instance started.
 *   - Host services may be called from any thread, including plugin workers.
 *   - No real work runs in static constructors: all work starts in `create`.
 *   - Collectives (zc_collectives, ABI 1.5) are the exception to "any
 *     thread": a plugin calls them only on the thread the host called it on,
 *     during that call (never from its worker threads, never after the call
 *     returned), because the host's MPI runs MPI_THREAD_FUNNELED. See
 *     zc_collectives for the ordering contract.
 *
 * LOADING RULES
 *   Plugins are built with -fvisibility=hidden and export exactly one symbol,
 *   ZC_PLUGIN_ENTRY_SYMBOL. The host loads them with RTLD_NOW|RTLD_LOCAL under
 *   one mutex and never unloads them, so manifest and table pointers stay valid
 *   for the life of the process. `run` loads only the plugins its config uses.
 * ----------------------------------------------------------------------------
 */
#ifndef ZCODE_ABI_H_
#define ZCODE_ABI_H_

#include <stddef.h>
#include <stdint.h>

#include <dlpack/dlpack.h>

/* DLPack 0.6 (DLPACK_VERSION 60) is the release the ABI is built and tested
 * against, and the oldest accepted. DLPack 1.x replaced DLPACK_VERSION by
 * DLPACK_MAJOR_VERSION and keeps DLTensor's layout (pinned at the end). */
#if !defined(DLPACK_MAJOR_VERSION) && (!defined(DLPACK_VERSION) || DLPACK_VERSION < 60)
#error "zcode/abi.h needs DLPack 0.6 or newer (DLPACK_VERSION >= 60): install libdlpack-dev from Debian 12 or newer"
#endif

#ifdef __cplusplus
extern "C" {
#endif

#define ZC_ABI_VERSION_MAJOR 1u
#define ZC_ABI_VERSION_MINOR 9u

/* The one exported symbol of every plugin. */
#define ZC_PLUGIN_ENTRY_SYMBOL "zcode_plugin_negotiate"

#if defined(_WIN32)
#define ZC_EXPORT __declspec(dllexport)
#else
#define ZC_EXPORT __attribute__((visibility("default")))
#endif

/* ------------------------------------------------------------------------ */
/* Enums (stored as uint32_t; append-only)                                   */
/* ------------------------------------------------------------------------ */

/* Stage kinds. */
typedef uint32_t zc_kind;
enum {
  ZC_KIND_UNKNOWN = 0,
  ZC_KIND_TOKENIZER = 1,
  ZC_KIND_DATALOADER = 2,
  ZC_KIND_MODEL = 3,
  ZC_KIND_OPTIMIZER = 4,
  ZC_KIND_SCHEDULER = 5,
  ZC_KIND_EVALUATOR = 6,
  ZC_KIND_CALLBACK = 7
};

/* The config's name of a kind ("tokenizer", ..., "callback"; "unknown"
 * otherwise): what `plugins list`, the sidecar index and messages print. */
static inline const char* zc_kind_name(zc_kind kind) {
  switch (kind) {
    case ZC_KIND_TOKENIZER: return "tokenizer";
    case ZC_KIND_DATALOADER: return "dataloader";
    case ZC_KIND_MODEL: return "model";
    case ZC_KIND_OPTIMIZER: return "optimizer";
    case ZC_KIND_SCHEDULER: return "scheduler";
    case ZC_KIND_EVALUATOR: return "evaluator";
    case ZC_KIND_CALLBACK: return "callback";
    default: return "unknown";
  }
}

/* Status codes carried by a zc_status. */
typedef uint32_t zc_status_code;
enum {
  ZC_OK = 0,
  ZC_ERR_INVALID_ARGUMENT = 1, /* bad option, shape, dtype or value */
  ZC_ERR_NOT_FOUND = 2,        /* file, tensor name or key missing */
  ZC_ERR_IO = 3,               /* read/write failure */
  ZC_ERR_DATA = 4,             /* malformed input data (file:line:col in message) */
  ZC_ERR_UNSUPPORTED = 5,      /* accepted but not implemented here (e.g. CUDA) */
  ZC_ERR_OUT_OF_MEMORY = 6,
  ZC_ERR_INTERNAL = 7,  /* a bug, or an exception caught by the SDK */
  ZC_ERR_CANCELLED = 8, /* the host asked the instance to stop */
  ZC_ERR_VERSION = 9    /* ABI or table version mismatch */
};

/* Log levels for zc_host_services.log. */
typedef uint32_t zc_log_level;
enum { ZC_LOG_TRACE = 0, ZC_LOG_DEBUG = 1, ZC_LOG_INFO = 2, ZC_LOG_WARN = 3, ZC_LOG_ERROR = 4 };

/* ------------------------------------------------------------------------ */
/* Opaque status and host services                                           */
/* ------------------------------------------------------------------------ */

/* Opaque; created by host services, released by the host. NULL == success. */
typedef struct zc_status zc_status;

/* (ABI 1.5) The job's collectives and an optimizer's shard; defined below. */
struct zc_collectives;
struct zc_param_shard;
/* (ABI 1.7) The host's profiler; defined below. */
struct zc_tracer;

/*
 * Services the host hands to the plugin at negotiation and to every instance
 * at create. The pointer stays valid for the life of the process.
 */
typedef struct zc_host_services {
  uint32_t struct_size;
  uint32_t abi_major;
  uint32_t abi_minor;
  uint32_t reserved0;
  void* host_ctx; /* pass back as the first argument of every service */

  /* Log one line. `component` names the plugin/stage; both strings are borrowed.
     Component "zcode.record": `message` is one JSON object that the host
     writes as is on stdout (--log-format json events), not a log line. */
  void (*log)(void* host_ctx, zc_log_level level, const char* component, const char* message);
  /* Create a status. `message` is copied. Never returns NULL for code != ZC_OK. */
  zc_status* (*status_create)(void* host_ctx, zc_status_code code, const char* message);
  /* Aligned allocation (alignment a power of two, >= 16); NULL on failure.
   * Memory from alloc must be released with free, on the same device. */
  void* (*alloc)(void* host_ctx, size_t bytes, size_t alignment, DLDevice device);
  void (*free)(void* host_ctx, void* ptr, DLDevice device);
  /* The run's global seed, and a 64-bit seed derived from it and a stream name
   * (SplitMix64 over FNV-1a of the name, XOR the seed): stable across runs and
   * machines, so every stage gets its own independent, reproducible stream. */
  uint64_t seed;
  uint64_t (*derive_seed)(void* host_ctx, const char* stream_name);
  /* Compute device, and the process-wide default stream (NULL on CPU).
   * Since ABI 1.4 each instance runs its calls on its own stream,
   * zc_create_args.stream; plugins built for older minors use this one. */
  DLDevice device;
  void* stream;
  /* Worker threads the instance may use for compute (hardware.num_threads). */
  int32_t num_threads;
  int32_t reserved1;
  /* Non-zero once the user asked the run to stop (Ctrl-C, SIGTERM). Long
   * loops poll it and return ZC_ERR_CANCELLED. */
  int32_t (*stop_requested)(void* host_ctx);
  /* Read and release a status returned by another stage's call (a plugin that
   * calls the tokenizer may pass the status on unchanged, or read it and
   * release it). The message stays valid until release. */
  zc_status_code (*status_code)(void* host_ctx, const zc_status* status);
  const char* (*status_message)(void* host_ctx, const zc_status* status);
  void (*status_release)(void* host_ctx, zc_status* status);

  /* ---- ABI 1.5: read only when struct_size covers it ---- */
  /* The processes of the job and their collectives (zc_collectives). Never
   * NULL from a 1.5 host: a one-process run gets groups of size 1, whose
   * collectives copy. Valid for the life of the services table. */
  const struct zc_collectives* collectives;

  /* ---- ABI 1.7: read only when struct_size covers it ---- */
  /* The run's profiler (zc_tracer). Never NULL from a 1.7 host; its level()
   * is 0 whenever nothing is recorded. Valid for the life of the table. */
  const struct zc_tracer* tracer;
} zc_host_services;

/* ------------------------------------------------------------------------ */
/* Small helper structs that cross the boundary                              */
/* ------------------------------------------------------------------------ */

/* A reference to another stage's instance, handed over by the host at create.
 * Borrowed: valid until the receiving instance is destroyed (the host
 * destroys dependents first). `table` points at the kind's table. */
typedef struct zc_stage_ref {
  const void* table;
  void* instance;
} zc_stage_ref;

/* A growable byte buffer owned by the caller. The callee appends through
 * `reserve`, which returns a pointer to at least `extra` writable bytes at
 * data+size (or NULL on allocation failure), then advances `size`. */
typedef struct zc_bytes {
  char* data;
  size_t size;
  size_t capacity;
  void* ctx;
  char* (*reserve)(struct zc_bytes* self, size_t extra);
} zc_bytes;

/* A growable int32 buffer owned by the caller; same protocol as zc_bytes. */
typedef struct zc_ids {
  int32_t* data;
  size_t size;
  size_t capacity;
  void* ctx;
  int32_t* (*reserve)(struct zc_ids* self, size_t extra);
} zc_ids;

/* A sink for named scalar metrics (loss, moe/load_0, ...). Names are borrowed. */
typedef struct zc_metrics_sink {
  void* ctx;
  void (*put)(void* ctx, const char* name, double value);
} zc_metrics_sink;

/* ------------------------------------------------------------------------ */
/* Tracing (ABI 1.7)                                                          */
/* ------------------------------------------------------------------------ */

/* What the host records now (zc_tracer.level), a bit mask. */
typedef uint32_t zc_trace_level;
enum {
  ZC_TRACE_OFF = 0,
  ZC_TRACE_SPANS = 1u << 0,  /* begin/end spans are recorded */
  ZC_TRACE_SHAPES = 1u << 1, /* profiling.profile_shapes: put shapes and FLOPs
                                into a span's args */
  ZC_TRACE_MEMORY = 1u << 2  /* profiling.profile_memory: counters of bytes */
};

/*
 * The host's profiler (zc_host_services.tracer): spans and counters a
 * plugin adds to the run's Chrome trace (trace.json, Trace Event Format),
 * beside the engine's own (data_wait, forward_backward, optimizer_step, ...).
 *
 * Cost: a plugin calls level() once per call of its own (or per phase) and
 * skips everything else when it returns 0, which it does whenever
 * profiling is off or the current step is not in profiling.schedule's
 * active window. begin/end/counter are no-ops then, so a plugin that calls
 * them unconditionally is correct, only slower.
 *
 * Threading: begin and end may be called from any thread; spans nest per
 * thread (end closes the span the same thread began last) and a thread's
 * spans get their own track (tid) in the trace; the thread the host called
 * the instance on shares the engine's track, so a model's phases nest inside
 * the engine's forward_backward span. A span left open when the host's call
 * returns is closed by the host at that point.
 *
 * Strings: borrowed for the duration of the call (the host copies them).
 * `category` is a short word ("forward", "backward", "optimizer"); `name`
 * the phase ("attention", "router"); `args_json` NULL or one JSON object
 * (e.g. {"layer":3,"flops":1.2e9}) that becomes the event's "args".
 */
typedef struct zc_tracer {
  uint32_t struct_size;
  uint32_t reserved0;
  void* ctx; /* pass back as the first argument */
  zc_trace_level (*level)(void* ctx);
  void (*begin)(void* ctx, const char* category, const char* name, const char* args_json);
  void (*end)(void* ctx);
  /* A counter event ("ph":"C"): `args_json` is one JSON object of numbers,
   * e.g. {"workspace_bytes":1048576}, drawn as one track per key. */
  void (*counter)(void* ctx, const char* name, const char* args_json);
} zc_tracer;

/* ------------------------------------------------------------------------ */
/* Collectives (ABI 1.5)                                                      */
/* ------------------------------------------------------------------------ */

/* The process groups of a multi-process job (distributed.expert_parallel = K
 * splits the world of W ranks into W/K expert groups of K consecutive ranks). */
typedef uint32_t zc_group;
enum {
  ZC_GROUP_WORLD = 0,      /* every rank of the job */
  ZC_GROUP_DATA = 1,       /* the ranks that hold the same dense parameters
                              and read different data: the world today */
  ZC_GROUP_EXPERT = 2,     /* the K ranks that split the experts among them */
  ZC_GROUP_EXPERT_DATA = 3 /* the W/K ranks that hold the same experts (rank
                              r's peers r mod K): expert gradients reduce here */
};

/* Reductions. AVG is SUM divided by the group's size (float types only). */
typedef uint32_t zc_reduce_op;
enum { ZC_REDUCE_SUM = 0, ZC_REDUCE_AVG = 1, ZC_REDUCE_MAX = 2, ZC_REDUCE_MIN = 3 };

/* Opaque: a non-blocking collective in flight, completed by wait(). */
typedef struct zc_comm_request zc_comm_request;

/*
 * The job's collectives (zc_host_services.collectives), over the host's
 * communicator (Open MPI on the CPU; NCCL on GPUs), so that a plugin never
 * links MPI or NCCL itself.
 *
 * Tensors: contiguous, dtype float32, float64 or int64 (int64 counts only
 * for reductions, any of the three for data movement), on the host's device;
 * counts are elements. `stream` is the calling instance's stream
 * (zc_create_args.stream; NULL on the CPU): device work is ordered on it.
 *
 * Blocking and not: with out_request NULL a call returns when its result is
 * in place. With out_request set it starts the collective and returns at
 * once with *out_request; its tensors must stay valid, and unwritten by
 * the caller, until wait(request) returns, and every started request is
 * waited for exactly once.
 *
 * Ordering contract (a collective that only some ranks reach is a hang):
 * every rank of `group` makes the same calls with the same counts, dtypes
 * and ops, in the same order, unconditionally; decide from values every rank
 * holds (an allreduced flag), never from a rank's own data. Non-blocking
 * calls count in the order they were started. Results are the same bits on
 * every rank of the group.
 *
 * Threading: only on the thread the host called the plugin on, during that
 * call (the THREADING CONTRACT above). Errors: a failed collective returns a
 * status naming the call and the rank; the host then ends the job (the other
 * ranks cannot be left waiting), so a plugin just returns the status.
 */
typedef struct zc_collectives {
  uint32_t struct_size;
  uint32_t reserved;
  void* ctx; /* pass back as the first argument */
  /* This process's rank in `group`, and the group's size. */
  int32_t (*rank)(void* ctx, zc_group group);
  int32_t (*size)(void* ctx, zc_group group);
  /* inout[n] becomes the elementwise reduction over the group. */
  zc_status* (*allreduce)(void* ctx, zc_group group, DLTensor* inout, zc_reduce_op op, void* stream,
                          zc_comm_request** out_request);
  /* send[Σ counts] reduced over the group; this rank receives its range,
   * recv[counts[rank]], the ranges following each other in rank order.
   * counts[size] (NULL: numel(send) / size each, which must divide). */
  zc_status* (*reduce_scatter)(void* ctx, zc_group group, const DLTensor* send, DLTensor* recv, const int64_t* counts,
                               zc_reduce_op op, void* stream, zc_comm_request** out_request);
  /* Every rank's send[counts[rank]] concatenated in rank order into
   * recv[Σ counts] (counts NULL: numel(send) each). */
  zc_status* (*allgather)(void* ctx, zc_group group, const DLTensor* send, DLTensor* recv, const int64_t* counts,
                          void* stream, zc_comm_request** out_request);
  /* send_counts[q] consecutive elements of send (rank order) go to rank q;
   * recv_counts[q] elements from rank q land consecutively in recv (rank
   * order). Both [size]; every rank's send_counts[q] equals rank q's
   * recv_counts[that rank] (exchange the counts first: an alltoallv of one
   * int64 each). */
  zc_status* (*alltoallv)(void* ctx, zc_group group, const DLTensor* send, const int64_t* send_counts, DLTensor* recv,
                          const int64_t* recv_counts, void* stream, zc_comm_request** out_request);
  /* Root's inout to every rank of the group (root is a rank in the group). */
  zc_status* (*broadcast)(void* ctx, zc_group group, DLTensor* inout, int32_t root, void* stream,
                          zc_comm_request** out_request);
  zc_status* (*barrier)(void* ctx, zc_group group);
  /* Completes a started collective and releases the request (also when it
   * failed: the status says why). */
  zc_status* (*wait)(void* ctx, zc_comm_request* request);
} zc_collectives;

/* ------------------------------------------------------------------------ */
/* State: every stage saves and restores through these                       */
/* ------------------------------------------------------------------------ */

/* Writer handed to save_state. Tensors are copied by the host before
 * put_tensor returns (into a safetensors file); the JSON blob is copied too
 * (into state.json). put_json may be called at most once. */
typedef struct zc_state_writer {
  uint32_t struct_size;
  uint32_t reserved;
  void* ctx;
  zc_status* (*put_tensor)(void* ctx, const char* name, const DLTensor* tensor);
  zc_status* (*put_json)(void* ctx, const char* json, size_t len);

  /* ---- ABI 1.5: present when struct_size covers it ---- */
  /* One rank's part of a tensor that several ranks hold in parts (ZeRO-1
   * optimizer state, zc_param_shard): `slice` (contiguous, 1-D or any shape
   * with numel elements) holds elements [begin, begin + numel) of the
   * row-major order of the whole tensor `name`, whose shape is shape[ndim]
   * (borrowed for the call). Every rank of the shard's group puts its part
   * (an empty part may be skipped); the host stores the parts of one
   * checkpoint so that a load on any layout sees the whole tensor (see
   * zc_state_reader). The parts of one name must not overlap, and together
   * with the other ranks' they must cover the tensor: the host checks both
   * when the checkpoint is written and fails the save otherwise. */
  zc_status* (*put_tensor_slice)(void* ctx, const char* name, const DLTensor* slice, int32_t ndim, const int64_t* shape,
                                 int64_t begin);
} zc_state_writer;

/* Reader handed to load_state. Returned tensors and json are borrowed for the
 * duration of load_state. get_tensor returns NULL when the name is missing. */
typedef struct zc_state_reader {
  uint32_t struct_size;
  uint32_t reserved;
  void* ctx;
  const DLTensor* (*get_tensor)(void* ctx, const char* name);
  size_t (*num_tensors)(void* ctx);
  const char* (*tensor_name)(void* ctx, size_t index);
  const char* json; /* "" when nothing was saved */
  size_t json_len;

  /* ---- ABI 1.5: present when struct_size covers it ---- */
  /* Copies elements [begin, begin + numel(dst)) of the row-major order of
   * tensor `name` into `dst` (caller-owned, contiguous, CPU, the tensor's
   * dtype), whether the checkpoint holds the tensor whole or in parts
   * written by put_tensor_slice on another number of ranks; get_tensor
   * also returns such a tensor whole. `numel` is the element count the
   * caller expects the whole tensor to have. Errors: ZC_ERR_NOT_FOUND (no
   * such tensor), ZC_ERR_DATA (another numel or dtype, or a range past its
   * end). What a sharded optimizer's load_state reads its range with. */
  zc_status* (*read_tensor_slice)(void* ctx, const char* name, int64_t numel, int64_t begin, DLTensor* dst);
} zc_state_reader;

/* ------------------------------------------------------------------------ */
/* Creation                                                                   */
/* ------------------------------------------------------------------------ */

/* Arguments of every table's create. All pointers borrowed for the call,
 * except `host` and the stage refs, which outlive the instance. */
typedef struct zc_create_args {
  uint32_t struct_size;
  uint32_t reserved;
  const zc_host_services* host;
  /* The stage's own options as a JSON object (already validated against the
   * component's options_schema_json by the host). */
  const char* options_json;
  /* The whole resolved config as JSON, for stages that read shared fields
   * (seed, model.max_seq_len, training.max_steps, ...). */
  const char* config_json;
  /* Output folder of the run (may be "" for tools that write nothing). */
  const char* run_dir;
  /* Stages this one needs; {NULL,NULL} when not applicable:
   *   dataloader <- tokenizer; model <- tokenizer (vocab size, pad id);
   *   evaluator <- model, tokenizer; optimizer <- model;
   *   callback <- model, tokenizer. */
  zc_stage_ref tokenizer;
  zc_stage_ref model;
  /* Data split for dataloaders: "train" or "val". */
  const char* split;

  /* ---- ABI 1.4: read only when struct_size covers it (a caller built for
   * 1.3 passes 80 bytes; zcode::sdk::CreateContext::stream() checks). ---- */
  /* The instance's compute stream: opaque, a cudaStream_t when host->device
   * is kDLCUDA, NULL on kDLCPU. Owned by the host and valid until the
   * instance is destroyed; the instance never destroys it. Every device operation of the instance's calls is enqueued
   * on it: the common save_state and load_state; dataloader next_batch;
   * model zero_grad, forward_backward, forward_logprobs, forward_eval,
   * decode_begin, decode_step, decode_reorder, forward_logits, activations,
   * named_activations; optimizer step and update_hessian; evaluator
   * evaluate (its own work: the model's calls run on the model's stream);
   * callback on_event. Results a call writes to CPU memory are complete
   * when it returns. Calls without an instance (estimate_memory) do no
   * device work and ignore it. One stream per instance is what a CUDA
   * backend and NCCL need; ZCode has no CUDA backend yet, so the host
   * passes NULL today. */
  void* stream;

  /* ---- ABI 1.5: read only when struct_size covers it ---- */
  /* Optimizer create only (NULL for every other kind, and for an optimizer
   * that updates every element): the part of every parameter this instance
   * updates and keeps state for (ZeRO-1, zc_param_shard). The host passes it
   * only to an optimizer whose table has shard_granularity. Borrowed: valid
   * until the instance is destroyed. */
  const struct zc_param_shard* shard;
} zc_create_args;

/* Every kind's table starts with this header. */
typedef struct zc_table_header {
  uint32_t struct_size; /* sizeof the full table as the plugin compiled it */
  zc_kind kind;
  uint32_t kind_version; /* grows when slots are appended to this kind */
  uint32_t reserved;
} zc_table_header;

/* True when `table` (a pointer to a TYPE, e.g. zc_model_table) was compiled
 * with SLOT, an appended slot, and sets it: the struct_size check that the
 * VERSIONING rules above ask of every reader. */
#define ZC_TABLE_HAS_SLOT(table, TYPE, SLOT) \
  ((table)->header.struct_size >= offsetof(TYPE, SLOT) + sizeof((table)->SLOT) && (table)->SLOT != NULL)

/* True when the sized struct at `s` (a pointer to a TYPE that begins with
 * struct_size, e.g. zc_create_args) was built with FIELD, a field appended
 * after its first version: the same check for structs. */
#define ZC_STRUCT_HAS_FIELD(s, TYPE, FIELD) ((s)->struct_size >= offsetof(TYPE, FIELD) + sizeof((s)->FIELD))

/* The common first slots of every table, after the header. */
#define ZC_TABLE_COMMON_SLOTS                                              \
  zc_table_header header;                                                  \
  /* Create an instance; on success *out_instance is set. */               \
  zc_status* (*create)(const zc_create_args* args, void** out_instance);   \
  /* Destroy; joins the instance's threads. Accepts NULL. */               \
  void (*destroy)(void* instance);                                         \
  /* Save everything needed for an exact resume. */                        \
  zc_status* (*save_state)(void* instance, const zc_state_writer* writer); \
  /* Restore what save_state wrote. */                                     \
  zc_status* (*load_state)(void* instance, const zc_state_reader* reader)

/* A table seen only through its common slots (for generic host code). */
typedef struct zc_table_base {
  ZC_TABLE_COMMON_SLOTS;
} zc_table_base;

/* ------------------------------------------------------------------------ */
/* Tokenizer                                                                  */
/* ------------------------------------------------------------------------ */

#define ZC_TOKENIZER_TABLE_VERSION 1u

/* encode flags */
enum {
  /* Parse special-token text (e.g. "<|endoftext|>") as special ids. Off by
   * default: special-looking text in data is ordinary text. */
  ZC_ENCODE_ALLOW_SPECIAL = 1u << 0
};

typedef struct zc_tokenizer_table {
  ZC_TABLE_COMMON_SLOTS;
  /* Number of ids, specials included. */
  zc_status* (*vocab_size)(void* instance, uint64_t* out_size);
  /* Append the ids of `text[0..len)` (UTF-8, may be invalid) to `out`. */
  zc_status* (*encode)(void* instance, const char* text, size_t len, uint32_t flags, zc_ids* out);
  /* Append the bytes of `ids[0..n)` to `out`. Ids out of range are an error. */
  zc_status* (*decode)(void* instance, const int32_t* ids, size_t n, zc_bytes* out);
  /* Id of a token string, or -1 (*out_id) when it is not in the vocab. */
  zc_status* (*token_to_id)(void* instance, const char* token, size_t len, int32_t* out_id);
  /* Append the token string of `id` to `out`. */
  zc_status* (*id_to_token)(void* instance, int32_t id, zc_bytes* out);
  /* JSON object describing the tokenizer, valid for the instance's life:
   * {"name":..., "identity": "<sha256 of files+options>", "vocab_size": N,
   *  "specials": {"<pad>": 0, "<bos>": 1, "<eos>": 2, ...},
   *  "pad_id": P, "bos_id": B, "eos_id": E} */
  zc_status* (*info_json)(void* instance, const char** out_json);
} zc_tokenizer_table;

/* ------------------------------------------------------------------------ */
/* Data loader                                                                */
/* ------------------------------------------------------------------------ */

#define ZC_DATALOADER_TABLE_VERSION 2u

/* One batch of packed token windows. Memory is owned by the data loader and
 * valid until the next next_batch/reset/destroy on the same instance. */
typedef struct zc_batch {
  uint32_t struct_size;
  uint32_t reserved;
  DLTensor input_ids;        /* int32 [batch, seq] */
  DLTensor targets;          /* int32 [batch, seq]; -1 marks positions excluded from
                                the loss (padding) */
  DLTensor doc_ids;          /* int32 [batch, seq] document index within each row, or
                                data == NULL when cross_document_attention is true */
  int64_t num_target_tokens; /* targets != -1 */
  int64_t num_target_bytes;  /* UTF-8 bytes those target tokens decode to */
  int64_t num_target_chars;  /* Unicode code points of the same */
  uint64_t epoch;            /* epoch this batch belongs to (0-based) */
} zc_batch;

typedef struct zc_dataloader_table {
  ZC_TABLE_COMMON_SLOTS;
  /* Fill *out with the next batch. *out_has_batch = 0 at the end of the split
   * for finite iteration (val); the train split cycles epochs forever. */
  zc_status* (*next_batch)(void* instance, zc_batch* out, int32_t* out_has_batch);
  /* Restart iteration from the beginning of the split (evaluation). */
  zc_status* (*reset)(void* instance);
  /* Scalar statistics into the sink: data_wait_ms, bad_records, epoch, ... */
  zc_status* (*stats)(void* instance, const zc_metrics_sink* sink);
  /* JSON array describing the sources for provenance:
   * [{"path":..., "sha256":..., "records":N, "skipped":M, "license":...}] */
  zc_status* (*provenance_json)(void* instance, const char** out_json);

  /* ---- ABI 1.8 (kind_version 2) ---- */
  /* Data parallelism: of every `size` consecutive batches of the one stream
   * (the stream of this loader with no shard), next_batch hands out the one
   * at position `rank` (0 <= rank < size) and passes over the others as if
   * they had been read, without filling them. The stream, the epochs and
   * save_state's position stay the unsharded ones: after a batch, the
   * position is the end of its group of `size`, so the ranks' positions
   * agree after every group and a checkpoint resumes with any `size`. Called
   * once, after create and before next_batch or load_state; size 1 is the
   * plain stream. ZC_ERR_UNSUPPORTED (or an absent slot): the host reads
   * every batch and keeps its share itself. */
  zc_status* (*set_data_shard)(void* instance, uint64_t rank, uint64_t size);
} zc_dataloader_table;

/* ------------------------------------------------------------------------ */
/* Model                                                                      */
/* ------------------------------------------------------------------------ */

#define ZC_MODEL_TABLE_VERSION 7u

/* Parameter flags. */
enum {
  ZC_PARAM_NO_DECAY = 1u << 0,  /* norm gains, biases, RoPE frequencies */
  ZC_PARAM_EMBEDDING = 1u << 1, /* token embedding (decay configurable) */
  ZC_PARAM_ROUTER = 1u << 2,    /* MoE router weight [n_experts, d_model] */
  ZC_PARAM_EXPERT = 1u << 3     /* an expert's weight */
};

/* Expert parallelism (a model that reads ZC_GROUP_EXPERT of size K > 1).
 * What the host relies on, rank by rank of an expert group:
 *   - params() lists the dense tensors (no ZC_PARAM_EXPERT) on every rank,
 *     the same ones in the same order, and the rank's own experts
 *     (ZC_PARAM_EXPERT) under their global names (the one-process names),
 *     in the one-process order; between two dense tensors the experts of
 *     group rank q come before those of rank q + 1. The host rebuilds the
 *     one-process order from that (the gradient norm's order).
 *   - Dense gradients are the rank's own micro-batch's; an expert's gradient
 *     is the sum over every group rank's tokens routed to it. In a step of
 *     several micro-batches the host calls zero_grad before the first only
 *     and may zero the dense gradients itself between micro-batches (they
 *     are fp32 CPU tensors it may write): the model must add each micro-
 *     batch's expert gradient to what the tensor holds.
 *   - State: save_state's tensors are named after parameters ("<name>" or
 *     "<name>.<buffer>", optimizers alike); the host gathers every rank's
 *     experts into one checkpoint (with ZeRO-1 the optimizer's parts hold
 *     the experts' state, each rank writing its slice) and hides from
 *     load_state the experts of the other group ranks, so a checkpoint
 *     loads on any K.
 *   - forward_backward, forward_eval and forward_logprobs are collectives of
 *     the expert group: every group rank calls them, the same number of
 *     times, in the same order. Decoding may be refused (glm52 refuses it). */

/* One named parameter with its gradient. Both tensors are fp32, contiguous,
 * on the model's device, owned by the model and valid for its life. */
typedef struct zc_param {
  const char* name; /* e.g. "layers.0.attn.wq" */
  DLTensor* value;
  DLTensor* grad;
  uint32_t flags;
  uint32_t reserved;
} zc_param;

typedef struct zc_param_list {
  const zc_param* params;
  size_t count;
} zc_param_list;

/* Label source for forward_backward. */
enum {
  ZC_LABELS_TARGETS = 0, /* the batch's targets */
  ZC_LABELS_SAMPLED = 1  /* labels sampled from the model's own softmax
                            (Sophia's Gauss-Newton-Bartlett estimator) */
};

typedef struct zc_fb_options {
  uint32_t struct_size;
  uint32_t label_mode;
  /* Loss = sum of per-token NLL / loss_normalizer, where the host passes the
   * number of target tokens of the whole optimizer step (all micro-batches),
   * so accumulation equals one big batch. */
  double loss_normalizer;
  /* Multiplier on the loss before backward (fp16 loss scaling; 1 in fp32). */
  double loss_scale;
  /* Seed for ZC_LABELS_SAMPLED. */
  uint64_t sample_seed;

  /* ---- ABI 1.5: read only when struct_size covers it ---- */
  /* Optional (NULL: nobody listens). The model calls grads_ready(ctx,
   * first, count) during backward, on the calling thread, as soon as the
   * gradients of params() [first, first + count) are final for this call
   * (this call writes them no more), so that the host can start reducing
   * them over the ranks while the backward goes on (data parallel, bucketed
   * as PyTorch DDP does). Every parameter is announced exactly once per
   * call, in any grouping; the ones never announced count as final when
   * forward_backward returns. The callback does not touch the model. */
  void* grads_ready_ctx;
  void (*grads_ready)(void* ctx, size_t first, size_t count);
} zc_fb_options;

/* (ABI 1.3) Bytes a stage will allocate for a run, by what they hold, filled
 * by the estimate_memory slots of the model and optimizer tables before any
 * instance exists, so that the host can check them against the machine's
 * memory. A field the stage does not own stays as the host set it (0). */
typedef struct zc_memory_estimate {
  uint32_t struct_size;
  uint32_t reserved;
  uint64_t parameter_bytes;       /* model: parameter storage */
  uint64_t gradient_bytes;        /* model: gradient storage */
  uint64_t optimizer_state_bytes; /* optimizer: its per-parameter state */
  uint64_t activation_bytes;      /* model: activation workspace of the largest
                                     batch the run feeds it (data.batch_size and
                                     evaluation.batch_size rows of
                                     model.max_seq_len tokens) */
} zc_memory_estimate;

/* (ABI 1.3) Where a model's estimate_memory lists its parameters: name
 * (borrowed for the call), shape [ndim] (borrowed) and ZC_PARAM_* flags. */
typedef struct zc_param_shape_sink {
  void* ctx;
  void (*put)(void* ctx, const char* name, int32_t ndim, const int64_t* shape, uint32_t flags);
} zc_param_shape_sink;

/* (ABI 1.4) Named tensors a call hands out, borrowed (the slot says for how
 * long), read-only: names[i] names tensors[i], i < count. The caller sets
 * struct_size to the size it was compiled with; the callee fills the fields
 * that fit in it (all of them for this first version) and leaves
 * struct_size as is, so a caller and a callee of different minors agree.
 * A struct_size smaller than this first version is ZC_ERR_VERSION. */
typedef struct zc_named_tensor_list {
  uint32_t struct_size;
  uint32_t reserved;
  size_t count;
  const char* const* names; /* [count], NUL-terminated */
  const DLTensor* tensors;  /* [count] */
} zc_named_tensor_list;

typedef struct zc_model_table {
  ZC_TABLE_COMMON_SLOTS;
  /* Total parameters and parameters active per token (top-k experts). */
  zc_status* (*num_params)(void* instance, uint64_t* out_total, uint64_t* out_active);
  /* The parameter list; valid for the instance's life. */
  zc_status* (*params)(void* instance, zc_param_list* out);
  zc_status* (*zero_grad)(void* instance);
  /* Forward and backward on one micro-batch; gradients ACCUMULATE into the
   * grad tensors. Metrics (loss = sum NLL / normalizer for this micro-batch,
   * aux losses, per-expert load, dropped fraction, masked-head fraction) go
   * to the sink. */
  zc_status* (*forward_backward)(void* instance, const zc_batch* batch, const zc_fb_options* options,
                                 const zc_metrics_sink* metrics);
  /* Forward only: per-position log-probability of the target, float32
   * [batch, seq] written into `out_logprobs` (caller-owned, CPU). Positions
   * with target -1 get 0. */
  zc_status* (*forward_logprobs)(void* instance, const zc_batch* batch, DLTensor* out_logprobs);
  /* JSON describing the architecture (resolved dims, variant, params):
   * valid for the instance's life. */
  zc_status* (*info_json)(void* instance, const char** out_json);

  /* Incremental decoding with a KV cache. A session holds the cache for
   * `batch` sequences of up to `max_len` tokens. */
  zc_status* (*decode_begin)(void* instance, int32_t batch, int32_t max_len, void** out_session);
  /* Append tokens[batch] at the next position of every sequence and write
   * next-token logits, float32 [batch, vocab_size] (caller-owned). */
  zc_status* (*decode_step)(void* instance, void* session, const int32_t* tokens, float* out_logits);
  /* Reorder sequences: new sequence i takes old sequence src[i]'s cache
   * (beam search). */
  zc_status* (*decode_reorder)(void* instance, void* session, const int32_t* src);
  void (*decode_end)(void* instance, void* session);
  /* Full forward logits for one sequence, float32 [n, vocab_size] (used to
   * check the KV cache against recomputation). */
  zc_status* (*forward_logits)(void* instance, const int32_t* tokens, int32_t n, float* out_logits);

  /* ---- kind_version 2 (ABI 1.1) ---- */
  /* Forward only, for evaluation: like forward_logprobs (same masks, same
   * batch semantics), and also the argmax id of each position's next-token
   * logits, int32 [batch, seq] (ties: lowest id; positions with target -1
   * get -1). Either output may be NULL. A model that does not implement it
   * returns ZC_ERR_UNSUPPORTED (the lm evaluator then reports accuracy only
   * when it can recompute it through forward_logits). */
  zc_status* (*forward_eval)(void* instance, const zc_batch* batch, DLTensor* out_logprobs, DLTensor* out_argmax);

  /* ---- kind_version 3 (ABI 1.2) ---- */
  /* Named activations that the last forward_backward kept for its backward,
   * for inspection (the debugger callback's histograms). Each entry's `value`
   * is a float32 CPU tensor [batch, seq, width] owned by the model, `grad` is
   * NULL and `flags` 0. The list and the tensors stay valid until the next
   * call on the instance; they are read-only. Before any forward_backward the
   * list is empty. A model without it returns ZC_ERR_UNSUPPORTED. */
  zc_status* (*activations)(void* instance, zc_param_list* out);

  /* ---- kind_version 4 (ABI 1.3) ---- */
  /* No instance: the bytes create(args) and the run's batches will allocate
   * (parameter_bytes, gradient_bytes, activation_bytes), computed from the
   * options alone, without allocating them. `args` is as for create
   * (args->tokenizer set). When `shapes` is not NULL, every parameter that
   * params() would list is put to it (the optimizer's estimate reads them).
   * A model without it returns ZC_ERR_UNSUPPORTED; plugins older than 1.3
   * lack the slot. The host then reports the estimate as unknown. */
  zc_status* (*estimate_memory)(const zc_create_args* args, const zc_param_shape_sink* shapes, zc_memory_estimate* out);

  /* ---- kind_version 5 (ABI 1.4) ---- */
  /* The same activations as `activations` (same names, order, tensors and
   * lifetime), typed as tensors rather than as parameters without
   * gradients. `out` as zc_named_tensor_list says. A model without it
   * returns ZC_ERR_UNSUPPORTED; plugins older than 1.4 lack the slot, and a
   * reader then falls back to `activations`. */
  zc_status* (*named_activations)(void* instance, zc_named_tensor_list* out);

  /* ---- kind_version 6 (ABI 1.6) ---- */
  /* Slot decoding, for continuous batching (a server's scheduler): one KV
   * cache of `slots` independent sequences of up to `max_len` tokens each,
   * every slot with its own length (0 at begin). Requests join and leave
   * between steps: a slot is reset and reused while the others go on.
   * `max_tokens` bounds the entries of one decode_slots_step (decode tokens
   * plus prefill chunks). The session ends with decode_end; decode_step and
   * decode_reorder are not for it (ZC_ERR_INVALID_ARGUMENT).
   * Memory: the cache is allocated here, once, and never grows. */
  zc_status* (*decode_slots_begin)(void* instance, int32_t slots, int32_t max_len, int32_t max_tokens,
                                   void** out_session);
  /* Appends n entries (1 <= n <= max_tokens): entry i appends tokens[i] to
   * slot slot_of[i] at that slot's next position. Entries of one slot are
   * consecutive positions in entry order and attend causally to each other
   * (chunked prefill: a prompt may arrive as several entries of one call,
   * or over several calls). For every entry with want_logits[i] != 0
   * (want_logits NULL: every entry) the next-token logits after it are
   * written, in entry order, as rows of out_logits, float32 [rows,
   * vocab_size] (caller-owned). Batch invariance: a row depends only on its
   * slot's tokens, never on the other entries of the call, the other slots
   * or the thread count, and a slot fed token by token gives the same bits
   * as decode_step on a session of batch 1, so a request served among
   * others generates exactly what it would alone. A model that cannot keep
   * that promise says so in its README. A slot past max_len, a token
   * outside the vocabulary or a slot outside [0, slots) is
   * ZC_ERR_INVALID_ARGUMENT, and no slot has advanced. */
  zc_status* (*decode_slots_step)(void* instance, void* session, int32_t n, const int32_t* slot_of,
                                  const int32_t* tokens, const uint8_t* want_logits, float* out_logits);
  /* Empties one slot (length 0) for the next sequence. */
  zc_status* (*decode_slot_reset)(void* instance, void* session, int32_t slot);

  /* ---- ABI 1.8 (kind_version 7) ---- */
  /* Appends n >= 1 tokens to every sequence of a decode_begin session:
   * tokens int32 [batch, n] row-major (sequence i's tokens in order), and
   * writes the next-token logits after each sequence's last one, float32
   * [batch, vocab_size]. The same cache and the same bits as n decode_step
   * calls (their last logits), with the positions run together (a prompt's
   * prefill: a GEMM over batch·n rows instead of n over batch rows). A
   * session that would pass max_len, a token outside the vocabulary or a
   * slot session is ZC_ERR_INVALID_ARGUMENT, and no sequence has advanced.
   * Hosts call decode_step n times where the slot is absent or returns
   * ZC_ERR_UNSUPPORTED (the SDK's default). */
  zc_status* (*decode_extend)(void* instance, void* session, int32_t n, const int32_t* tokens, float* out_logits);
} zc_model_table;

/* ------------------------------------------------------------------------ */
/* Optimizer                                                                  */
/* ------------------------------------------------------------------------ */

#define ZC_OPTIMIZER_TABLE_VERSION 3u

/* (ABI 1.5) ZeRO-1 (Rajbhandari et al. 2020, "ZeRO", stage 1: optimizer
 * state partitioning): the part of every parameter one optimizer instance
 * updates and keeps state for. The host lays the parameters out flat, in
 * params() order, and gives each rank of `group` one contiguous range of
 * that order; parameter i's part is then elements [begin[i], end[i]) of its
 * row-major order (begin == end: none of it). The parts of all ranks of the
 * group cover every element once. Inside a parameter a part starts and ends
 * only at multiples of the optimizer's shard_granularity for it (or at the
 * parameter's ends).
 *
 * What the host guarantees at step(): the gradient elements of the part hold
 * the step's reduced (global) gradient, clipped; the other elements of the
 * gradients are undefined. What the optimizer does: it reads and writes
 * parameters and gradients only inside its part (the host all-gathers the
 * updated parameters afterwards), keeps state only for its part, and when a
 * formula needs a statistic of a whole tensor (LAMB's norms, Adafactor's
 * row and column sums), it reduces its part's contribution over the
 * parameter's group with the collectives (host->collectives), the same
 * calls in the same order on every rank. Its save_state writes its part of
 * each per-element state tensor with put_tensor_slice; load_state reads it
 * with read_tensor_slice (a checkpoint written by any layout loads).
 *
 * Groups (ABI 1.9): with expert parallelism the ranks that share a dense
 * tensor (DATA) are not those that share an expert (EXPERT_DATA), so each
 * parameter names its own: groups[i] when the struct has the field and it
 * is non-NULL, `group` otherwise. Each group's parts tile its parameters on
 * their own: the parameters of one group, in params() order, are laid out
 * flat and split in contiguous ranges among that group's ranks. A reduction
 * over several parameters stays within one group; an optimizer reduces the
 * groups in increasing zc_group order (every rank lists parameters of the
 * same groups: each rank of an expert-parallel job holds experts). */
typedef struct zc_param_shard {
  uint32_t struct_size;
  uint32_t group;       /* a zc_group: the ranks that share every parameter (since 1.9: those without groups[i]) */
  size_t count;         /* = the model's params().count */
  const int64_t* begin; /* [count] */
  const int64_t* end;   /* [count] */
  /* ---- ABI 1.9 ---- */
  const uint32_t* groups; /* [count] zc_group per parameter; NULL: `group` for every one */
} zc_param_shard;

typedef struct zc_optimizer_table {
  ZC_TABLE_COMMON_SLOTS; /* create receives args->model: the params to update */
  /* Apply one update with learning rate `lr` to every parameter, reading the
   * (already clipped) gradients. `step` counts from 1. */
  zc_status* (*step)(void* instance, double lr, uint64_t step);
  /* Steps between Hessian estimates (0 = never). When non-zero, the host,
   * every that many steps, zeroes the grads, runs forward_backward with
   * ZC_LABELS_SAMPLED and calls update_hessian. */
  zc_status* (*hessian_interval)(void* instance, uint64_t* out_interval);
  zc_status* (*update_hessian)(void* instance, int64_t num_tokens);

  /* ---- kind_version 2 (ABI 1.3) ---- */
  /* No instance: the state bytes create(args) would allocate
   * (optimizer_state_bytes). args->model is a model whose params() lists
   * the parameters with their shapes and flags but NULL data: read shapes,
   * never data. Same fallbacks as zc_model_table.estimate_memory. Since
   * ABI 1.5 args->shard may be set: the bytes of that part's state. */
  zc_status* (*estimate_memory)(const zc_create_args* args, zc_memory_estimate* out);

  /* ---- kind_version 3 (ABI 1.5) ---- */
  /* No instance (args as for estimate_memory): whether and where the
   * optimizer's state can be split between ranks (zc_param_shard). Writes
   * out[i], i < count (= params().count), the multiple of elements at which
   * a part may start or end inside parameter i: 1 for per-element state
   * (AdamW), a block of rows for state reduced along rows or columns, numel
   * or more for a parameter that must not be split. An optimizer without
   * this slot is never sharded (the host refuses distributed.zero_stage 1
   * for it, naming it). */
  zc_status* (*shard_granularity)(const zc_create_args* args, int64_t* out, size_t count);
} zc_optimizer_table;

/* ------------------------------------------------------------------------ */
/* Scheduler                                                                  */
/* ------------------------------------------------------------------------ */

#define ZC_SCHEDULER_TABLE_VERSION 1u

typedef struct zc_scheduler_table {
  ZC_TABLE_COMMON_SLOTS;
  /* Learning rate for optimizer step `step` (0-based count of updates done
   * before this one) given the base lr from optimizer.lr. */
  zc_status* (*lr)(void* instance, uint64_t step, double base_lr, double* out_lr);
} zc_scheduler_table;

/* ------------------------------------------------------------------------ */
/* Evaluator                                                                  */
/* ------------------------------------------------------------------------ */

#define ZC_EVALUATOR_TABLE_VERSION 1u

typedef struct zc_evaluator_table {
  ZC_TABLE_COMMON_SLOTS; /* create receives args->model and args->tokenizer */
  /* Evaluate over one full pass of `data` (reset first by the evaluator) and
   * put the metrics (prefixed by the evaluator's choice, e.g. "perplexity")
   * to the sink. */
  zc_status* (*evaluate)(void* instance, zc_stage_ref data, const zc_metrics_sink* metrics);
} zc_evaluator_table;

/* ------------------------------------------------------------------------ */
/* Callback                                                                   */
/* ------------------------------------------------------------------------ */

#define ZC_CALLBACK_TABLE_VERSION 1u

typedef uint32_t zc_event_kind;
enum {
  ZC_EVENT_SETUP = 1,
  ZC_EVENT_STEP_END = 2,
  ZC_EVENT_EVAL_END = 3,
  ZC_EVENT_CHECKPOINT = 4,
  ZC_EVENT_TEARDOWN = 5
};

/* A sized, tagged event. A callback ignores kinds it does not know. */
typedef struct zc_event {
  uint32_t struct_size;
  zc_event_kind kind;
  uint64_t step;
  uint64_t max_steps;
  /* JSON object of the event's metrics ({"loss":..., "lr":...}); for
   * CHECKPOINT {"path": ...}; for TEARDOWN the run summary. Borrowed. */
  const char* metrics_json;
  /* The model, for callbacks that inspect parameters and gradients. */
  zc_stage_ref model;
} zc_event;

enum {
  ZC_CALLBACK_REQUEST_STOP = 1u << 0, /* stop training after this step */
  /* (ABI 1.1) write a checkpoint after this step: the engine owns writing
   * (atomic folder, `latest`, keep_last_n); callbacks decide the cadence. */
  ZC_CALLBACK_REQUEST_CHECKPOINT = 1u << 1
};

typedef struct zc_callback_table {
  ZC_TABLE_COMMON_SLOTS; /* create receives args->run_dir */
  zc_status* (*on_event)(void* instance, const zc_event* event, uint32_t* out_flags);
} zc_callback_table;

/* ------------------------------------------------------------------------ */
/* Manifest and negotiation                                                   */
/* ------------------------------------------------------------------------ */

/* One stage implementation exported by a plugin file. */
typedef struct zc_component {
  uint32_t struct_size;
  zc_kind kind;
  const char* name;                /* the config's `type:` / `name:` value */
  const char* description;         /* one line */
  const char* options_schema_json; /* JSON Schema (draft 2020-12 subset) of options */
  const void* table;               /* a zc_<kind>_table */
} zc_component;

typedef struct zc_manifest {
  uint32_t struct_size;
  uint32_t num_components;
  const char* name;                /* plugin name, e.g. "bpe" */
  const char* version;             /* plugin's own version, semver */
  const char* license;             /* SPDX identifier */
  const char* description;         /* one line */
  const char* options_schema_json; /* schema shared by all components, or "{}" */
  const zc_component* components;
} zc_manifest;

/*
 * The exported entry point, ZC_PLUGIN_ENTRY_SYMBOL. The host passes its ABI
 * version and services; the plugin writes the ABI version it was built for and
 * its static manifest. Returns ZC_OK, or ZC_ERR_VERSION when the plugin itself
 * refuses the host's version. Out-parameters are written on every return so
 * that the host can print both versions. The services pointer outlives the
 * plugin. Must not allocate or start threads.
 */
typedef zc_status_code (*zc_negotiate_fn)(uint32_t host_abi_major, uint32_t host_abi_minor,
                                          const zc_host_services* services, uint32_t* out_plugin_abi_major,
                                          uint32_t* out_plugin_abi_minor, const zc_manifest** out_manifest);

#ifdef __cplusplus
} /* extern "C" */
#endif

/* Pinned layouts (LP64). A change here is an ABI break: bump the major. */
/* C99 has no _Static_assert: a negative array size fails the build instead. */
#if defined(__cplusplus)
#define ZC_STATIC_ASSERT(c, m) static_assert(c, m)
#else
#define ZC_SA_CAT2(a, b) a##b
#define ZC_SA_CAT(a, b) ZC_SA_CAT2(a, b)
#define ZC_STATIC_ASSERT(c, m) typedef char ZC_SA_CAT(zc_layout_check_, __LINE__)[(c) ? 1 : -1]
#endif
#if UINTPTR_MAX == 0xFFFFFFFFFFFFFFFFu
ZC_STATIC_ASSERT(sizeof(zc_table_header) == 16, "zc_table_header layout");
ZC_STATIC_ASSERT(sizeof(zc_host_services) == 144, "zc_host_services layout");
ZC_STATIC_ASSERT(offsetof(zc_host_services, collectives) == 128, "zc_host_services.collectives (ABI 1.5)");
ZC_STATIC_ASSERT(offsetof(zc_host_services, tracer) == 136, "zc_host_services.tracer (ABI 1.7)");
ZC_STATIC_ASSERT(sizeof(zc_tracer) == 48, "zc_tracer layout (ABI 1.7)");
ZC_STATIC_ASSERT(sizeof(zc_collectives) == 88, "zc_collectives layout (ABI 1.5)");
ZC_STATIC_ASSERT(sizeof(zc_param_shard) == 40, "zc_param_shard layout (ABI 1.9)");
ZC_STATIC_ASSERT(offsetof(zc_param_shard, groups) == 32, "zc_param_shard.groups (ABI 1.9)");
ZC_STATIC_ASSERT(sizeof(zc_state_writer) == 40, "zc_state_writer layout");
ZC_STATIC_ASSERT(offsetof(zc_state_writer, put_tensor_slice) == 32, "zc_state_writer.put_tensor_slice (ABI 1.5)");
ZC_STATIC_ASSERT(sizeof(zc_state_reader) == 64, "zc_state_reader layout");
ZC_STATIC_ASSERT(offsetof(zc_state_reader, read_tensor_slice) == 56, "zc_state_reader.read_tensor_slice (ABI 1.5)");
ZC_STATIC_ASSERT(offsetof(zc_host_services, seed) == 56, "zc_host_services.seed");
ZC_STATIC_ASSERT(offsetof(zc_host_services, stop_requested) == 96, "stop_requested");
ZC_STATIC_ASSERT(sizeof(DLTensor) == 48, "DLTensor layout (DLPack 0.6)");
ZC_STATIC_ASSERT(sizeof(zc_create_args) == 96, "zc_create_args layout");
ZC_STATIC_ASSERT(offsetof(zc_create_args, stream) == 80, "zc_create_args.stream (ABI 1.4)");
ZC_STATIC_ASSERT(offsetof(zc_create_args, shard) == 88, "zc_create_args.shard (ABI 1.5)");
ZC_STATIC_ASSERT(sizeof(zc_table_base) == 48, "zc_table_base layout");
ZC_STATIC_ASSERT(sizeof(zc_tokenizer_table) == 96, "zc_tokenizer_table layout");
ZC_STATIC_ASSERT(sizeof(zc_dataloader_table) == 88, "zc_dataloader_table layout");
ZC_STATIC_ASSERT(offsetof(zc_dataloader_table, set_data_shard) == 80, "zc_dataloader_table.set_data_shard (ABI 1.8)");
ZC_STATIC_ASSERT(sizeof(zc_model_table) == 200, "zc_model_table layout");
ZC_STATIC_ASSERT(offsetof(zc_model_table, activations) == 144, "zc_model_table.activations (ABI 1.2)");
ZC_STATIC_ASSERT(offsetof(zc_model_table, estimate_memory) == 152, "zc_model_table.estimate_memory (ABI 1.3)");
ZC_STATIC_ASSERT(offsetof(zc_model_table, named_activations) == 160, "zc_model_table.named_activations (ABI 1.4)");
ZC_STATIC_ASSERT(offsetof(zc_model_table, decode_slot_reset) == 184, "zc_model_table.decode_slot_reset (ABI 1.6)");
ZC_STATIC_ASSERT(offsetof(zc_model_table, decode_extend) == 192, "zc_model_table.decode_extend (ABI 1.8)");
ZC_STATIC_ASSERT(sizeof(zc_named_tensor_list) == 32, "zc_named_tensor_list layout");
ZC_STATIC_ASSERT(sizeof(zc_optimizer_table) == 88, "zc_optimizer_table layout");
ZC_STATIC_ASSERT(offsetof(zc_optimizer_table, shard_granularity) == 80,
                 "zc_optimizer_table.shard_granularity (ABI 1.5)");
ZC_STATIC_ASSERT(offsetof(zc_optimizer_table, estimate_memory) == 72, "zc_optimizer_table.estimate_memory (ABI 1.3)");
ZC_STATIC_ASSERT(sizeof(zc_memory_estimate) == 40, "zc_memory_estimate layout");
ZC_STATIC_ASSERT(sizeof(zc_param_shape_sink) == 16, "zc_param_shape_sink layout");
ZC_STATIC_ASSERT(sizeof(zc_scheduler_table) == 56, "zc_scheduler_table layout");
ZC_STATIC_ASSERT(sizeof(zc_evaluator_table) == 56, "zc_evaluator_table layout");
ZC_STATIC_ASSERT(sizeof(zc_callback_table) == 56, "zc_callback_table layout");
ZC_STATIC_ASSERT(sizeof(zc_batch) == 8 + 3 * sizeof(DLTensor) + 32, "zc_batch layout");
ZC_STATIC_ASSERT(sizeof(zc_component) == 40, "zc_component layout");
ZC_STATIC_ASSERT(sizeof(zc_manifest) == 56, "zc_manifest layout");
ZC_STATIC_ASSERT(sizeof(zc_event) == 48, "zc_event layout");
ZC_STATIC_ASSERT(sizeof(zc_param) == 32, "zc_param layout");
ZC_STATIC_ASSERT(sizeof(zc_fb_options) == 48, "zc_fb_options layout");
ZC_STATIC_ASSERT(offsetof(zc_fb_options, grads_ready) == 40, "zc_fb_options.grads_ready (ABI 1.5)");
#endif

#endif /* ZCODE_ABI_H_ */
