// zcode/sdk/trace.h: spans and counters into the host's profiler
// (zc_tracer, ABI 1.7).
//
//   sdk::Tracer tr(ctx.host().raw());       // keep it for the instance's life
//   const zc_trace_level lv = tr.level();    // once per call
//   {
//     auto s = tr.span_with(lv, "forward", "attention", [&](sdk::json::Writer& w, zc_trace_level l) {
//       w.key("layer").integer(layer);
//       if (l & ZC_TRACE_SHAPES) w.key("flops").number(flops, 6);
//     });
//     ... the phase ...
//   }  // the span ends here
//
// Under a host older than 1.7 (no zc_host_services.tracer), or while the
// host records nothing (level() == 0: profiling off, or a step outside the
// schedule's active window), level() costs one indirect call and every
// span a branch: no string is built and nothing is allocated.
#pragma once

#include <zcode/abi.h>
#include <zcode/sdk/host.h>
#include <zcode/sdk/json.h>

#include <cstdint>
#include <string>
#include <utility>

namespace zcode::sdk {

class Tracer {
 public:
  Tracer() = default;
  explicit Tracer(const zc_host_services* host)
      : t_(host && ZC_STRUCT_HAS_FIELD(host, zc_host_services, tracer) ? host->tracer : nullptr) {}

  /// What the host records now (ZC_TRACE_* bits); 0 without a tracer.
  zc_trace_level level() const { return t_ ? t_->level(t_->ctx) : static_cast<zc_trace_level>(ZC_TRACE_OFF); }

  /// An open span; ends when destroyed (or at end()). Movable, not copyable.
  /// Spans nest per thread and the host's end closes the span the thread
  /// began last, so end() an open span before beginning the next phase in
  /// its place: `s = tr.span(...)` over an open `s` begins the new span
  /// first, and the old one's end() then closes the new one.
  class Span {
   public:
    Span() = default;
    Span(Span&& o) noexcept : t_(std::exchange(o.t_, nullptr)) {}
    Span& operator=(Span&& o) noexcept {
      if (this != &o) {
        end();
        t_ = std::exchange(o.t_, nullptr);
      }
      return *this;
    }
    Span(const Span&) = delete;
    Span& operator=(const Span&) = delete;
    ~Span() { end(); }
    void end() {
      if (const zc_tracer* t = std::exchange(t_, nullptr)) t->end(t->ctx);
    }

   private:
    friend class Tracer;
    explicit Span(const zc_tracer* t) : t_(t) {}
    const zc_tracer* t_ = nullptr;
  };

  /// Begins `category`/`name` when spans are recorded (`level`: one
  /// level() read, which the caller may share among the spans of a call).
  /// `args_json`: NULL or one JSON object, copied by the host.
  Span span(zc_trace_level level, const char* category, const char* name, const char* args_json = nullptr) const {
    if (!t_ || !(level & ZC_TRACE_SPANS)) return Span();
    t_->begin(t_->ctx, category, name, args_json);
    return Span(t_);
  }
  /// The same with args written by `args(json::Writer&, level)` (the
  /// members of one object), which runs only when spans are recorded; it
  /// may add shapes and FLOPs when `level` has ZC_TRACE_SHAPES.
  template <class Args>
  Span span_with(zc_trace_level level, const char* category, const char* name, Args&& args) const {
    if (!t_ || !(level & ZC_TRACE_SPANS)) return Span();
    json::Writer w;
    w.begin_object();
    args(w, level);
    w.end_object();
    t_->begin(t_->ctx, category, name, w.str().c_str());
    return Span(t_);
  }

  /// A counter event: `values(json::Writer&)` writes its members (numbers).
  template <class Values>
  void counter(zc_trace_level level, const char* name, Values&& values) const {
    if (!t_ || !(level & ZC_TRACE_SPANS)) return;
    json::Writer w;
    w.begin_object();
    values(w);
    w.end_object();
    t_->counter(t_->ctx, name, w.str().c_str());
  }

 private:
  const zc_tracer* t_ = nullptr;
};

}  // namespace zcode::sdk
