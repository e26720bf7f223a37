// The failure of a call into a library the runner drives (MPI, CUDA, NCCL), typed like db's
// DbError: the call, the library's code and its error string. Internal to hw_runner: a rank turns
// one into the message with which it aborts the job.
#pragma once

#include <stdexcept>
#include <string>

namespace optiflow::hw_runner::detail {

/// A failed library call. what() is "CALL failed: MESSAGE (LIBRARY error CODE)", then "; NOTE"
/// when the runner knows more than the library said.
class CallError : public std::runtime_error {
 public:
  CallError(const std::string& library, const std::string& call, int code,
            const std::string& message, const std::string& note = {})
      : std::runtime_error(call + " failed: " + message + " (" + library + " error " +
                           std::to_string(code) + ")" + (note.empty() ? "" : "; " + note)),
        call_(call),
        code_(code),
        message_(message) {}

  const std::string& call() const { return call_; }  ///< "MPI_Allreduce", "cudaMalloc", ...
  int code() const {
    return code_;
  }  ///< the library's own code (MPI error class, cudaError_t, ...)
  const std::string& message() const { return message_; }  ///< the library's error string

 private:
  std::string call_;
  int code_;
  std::string message_;
};

/// A failed CUDA runtime call (code: the cudaError_t).
class CudaError : public CallError {
 public:
  CudaError(const std::string& call, int code, const std::string& message)
      : CallError("CUDA", call, code, message) {}
};

/// A failed NCCL call (code: the ncclResult_t).
class NcclError : public CallError {
 public:
  NcclError(const std::string& call, int code, const std::string& message,
            const std::string& note = {})
      : CallError("NCCL", call, code, message, note) {}
};

}  // namespace optiflow::hw_runner::detail
