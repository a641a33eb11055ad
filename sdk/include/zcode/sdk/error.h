// zcode/sdk/error.h: exceptions inside a plugin, status codes across the ABI.
//
// Plugin code throws zcode::sdk::Error; the SDK's thunks (plugin.h) catch
// every exception and turn it into a host-created zc_status, so nothing ever
// unwinds through the C boundary.
#pragma once

#include <zcode/abi.h>

#include <stdexcept>
#include <string>
#include <utility>

namespace zcode::sdk {

/// An error with a ZCode status code. `what()` is the one-line message a user
/// sees, e.g. `data.train_path: file 'x.jsonl' not found`.
class Error : public std::runtime_error {
 public:
  Error(zc_status_code code, const std::string& message) : std::runtime_error(message), code_(code) {}
  zc_status_code code() const noexcept { return code_; }

 private:
  zc_status_code code_;
};

/// Throws Error(ZC_ERR_INVALID_ARGUMENT, msg).
[[noreturn]] inline void invalid_argument(const std::string& msg) { throw Error(ZC_ERR_INVALID_ARGUMENT, msg); }

/// A status returned by another stage (e.g. the tokenizer), carried up
/// unchanged: the host created it, so the host will release it.
class StatusError : public std::exception {
 public:
  StatusError(const zc_host_services* host, zc_status* status) : host_(host), status_(status) {
    if (host_ && host_->status_message && status_) message_ = host_->status_message(host_->host_ctx, status_);
  }
  StatusError(StatusError&& o) noexcept
      : host_(o.host_), status_(std::exchange(o.status_, nullptr)), message_(std::move(o.message_)) {}
  StatusError(const StatusError&) = delete;
  ~StatusError() override {
    if (status_ && host_ && host_->status_release) host_->status_release(host_->host_ctx, status_);
  }
  const char* what() const noexcept override { return message_.c_str(); }
  zc_status_code code() const noexcept {
    if (host_ && status_) return host_->status_code(host_->host_ctx, status_);
    return static_cast<zc_status_code>(ZC_ERR_INTERNAL);
  }
  /// Hands the status back (for returning across the ABI).
  zc_status* release() noexcept { return std::exchange(status_, nullptr); }

 private:
  const zc_host_services* host_;
  zc_status* status_;
  std::string message_;
};

/// Throws StatusError when `s` is non-NULL (the result of a call into another
/// stage's table).
inline void check(const zc_host_services* host, zc_status* s) {
  if (s) throw StatusError(host, s);
}

}  // namespace zcode::sdk
