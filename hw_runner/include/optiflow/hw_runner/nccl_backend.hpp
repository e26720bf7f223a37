// The NCCL + CUDA backend: one rank per GPU, started by mpirun or srun (MPI only bootstraps
// the NCCL communicator). The schedule runs as the level plan of level_plan.hpp: per level,
// local copies and reductions as CUDA kernels, then the level's ncclSend/ncclRecv in one group
// call, all on the rank's stream; timing with CUDA events; the native ncclAllGather /
// ncclReduceScatter / ncclAllReduce measured in the same job.
#pragma once

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

}  // namespace optiflow::hw_runner
