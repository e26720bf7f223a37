// The NCCL + CUDA backend: one rank per GPU, started by mpirun or srun (MPI only bootstraps
// the NCCL communicator). The schedule runs as the level plan of level_plan.hpp: per level,
// local copies and reductions as CUDA kernels, then the level's ncclSend/ncclRecv in one group
// call, all on the rank's stream; timing with CUDA events; the native ncclAllGather /
// ncclReduceScatter / ncclAllReduce measured in the same job. The ping-pong calibration of
// calibrate.hpp has an NCCL form here too.
#pragma once

#include <stdexcept>
#include <vector>

#include "optiflow/hw_runner/calibrate.hpp"
#include "optiflow/hw_runner/measure.hpp"
#include "optiflow/schedule/schedule.hpp"

namespace optiflow::hw_runner {

/// Whether this build has the NCCL backend (CUDA and NCCL were found when it was configured).
bool nccl_backend_built();

/// "ncclAllGather", "ncclReduceScatter", "ncclAllReduce".
std::string nccl_native_name(support::Collective collective);

/// Runs on every rank of the job, like run_mpi_job. Returns kNoDevice on every rank when a
/// rank finds no GPU (cudaGetDeviceCount fails or returns 0): a skip, reported, not an error.
/// Throws std::runtime_error when the backend was not built.
int run_nccl_job(const schedule::Schedule& schedule, const RunOptions& options,
                 const Reporter& reporter);

/// Thrown by run_nccl_calibration on every rank, after MPI is finalised, when some rank finds
/// no GPU: the calibration's kNoDevice, a skip rather than a failure.
class NoDeviceError : public std::runtime_error {
 public:
  using std::runtime_error::runtime_error;
};

/// run_mpi_calibration on GPUs: on every rank of the job (one GPU per rank, MPI bootstraps the
/// communicator), ncclSend/ncclRecv round trips between every pair a < b at every size on the
/// rank's stream, timed with CUDA events on rank a. Returns the samples on rank 0 (both
/// directions of a pair with the same time), empty on the others. Aborts the job with a message
/// naming the pair when a ping-pong outlasts options.timeout_s. Throws NoDeviceError when a
/// rank has no GPU, std::runtime_error when the backend was not built.
std::vector<PairSample> run_nccl_calibration(const CalibrationOptions& options);

}  // namespace optiflow::hw_runner
