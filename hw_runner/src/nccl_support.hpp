// What the NCCL job and the NCCL calibration share: typed CUDA and NCCL errors, the choice of a
// rank's GPU, the communicator, and the stream's wait with its deadline. Internal to hw_runner;
// built only with the NCCL backend.
#pragma once

#include <cuda_runtime.h>
#include <nccl.h>

#include <functional>
#include <optional>
#include <string>

#include "call_error.hpp"
#include "mpi_support.hpp"

namespace optiflow::hw_runner::detail {

inline void check_cuda(cudaError_t code, const char* call) {
  if (code != cudaSuccess) throw CudaError(call, static_cast<int>(code), cudaGetErrorString(code));
}

inline void check_nccl(ncclResult_t code, const char* call) {
  if (code != ncclSuccess) throw NcclError(call, static_cast<int>(code), ncclGetErrorString(code));
}

/// "NCCL 2.28.9, CUDA runtime 13.0".
std::string nccl_version_text();

/// This rank's GPU (its rank on its node, modulo the node's GPUs), set current. Every rank
/// agrees: when some rank has no GPU, none on every rank (that rank says why on stderr).
std::optional<int> find_device(const MpiSession& session);

/// The communicator of every rank of the job: rank 0's unique id, broadcast over MPI.
/// `device` is this rank's (find_device): when NCCL refuses the communicator and some ranks
/// share a GPU, the NcclError says which.
ncclComm_t init_comm(const MpiSession& session, Watchdog& watchdog, double timeout_s, int device);

/// Polls the stream until it is idle; past `deadline` (MPI_Wtime) aborts the job with
/// timeout_message(timeout_s, what) and what `stuck` adds. A stuck driver call is the watchdog's.
void poll_stream(cudaStream_t stream, const MpiSession& session, double deadline, double timeout_s,
                 const std::string& what, const std::function<std::string()>& stuck = {});

}  // namespace optiflow::hw_runner::detail
