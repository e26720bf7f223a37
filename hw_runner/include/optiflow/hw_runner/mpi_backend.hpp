// The MPI backend: one rank per process, real buffers in host memory, the schedule's steps
// driven by non-blocking MPI point-to-point (tag = channel, so each connection is a FIFO by
// MPI's non-overtaking rule), and the library's MPI_Allgather / MPI_Reduce_scatter_block /
// MPI_Allreduce measured beside it in the same job.
#pragma once

#include "optiflow/hw_runner/measure.hpp"
#include "optiflow/schedule/schedule.hpp"

namespace optiflow::hw_runner {

/// The MPI collective that does what `collective` does ("MPI_Allgather", ...), with the
/// algorithm it was made to use where there is one ("MPI_Allgather (ring)").
std::string mpi_native_name(support::Collective collective, const std::string& algorithm = {});

/// Open MPI's coll/tuned name for `algorithm` of the native collective ("recursive-doubling"
/// -> "recursive_doubling"); throws support::InputError naming --native-algorithm and the
/// algorithms Open MPI 4.1 has for it.
std::string open_mpi_algorithm(support::Collective collective, const std::string& algorithm);

/// Runs on every rank of an MPI job (started by mpirun or srun); initialises and finalises
/// MPI. The job must have schedule.ranks processes. `reporter` is called on rank 0. Returns
/// the same status on every rank: 0, or kWrongData when some size produced wrong data. A rank
/// that fails (an MPI error, a timeout) aborts the whole job with a message naming it.
int run_mpi_job(const schedule::Schedule& schedule, const RunOptions& options,
                const Reporter& reporter);

}  // namespace optiflow::hw_runner
