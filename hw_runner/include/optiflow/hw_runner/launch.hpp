// Starting a job: `optiflow run` re-executes itself under mpirun (one process per rank), or,
// when mpirun or srun already started it, runs as one of the ranks.
#pragma once

#include <string>
#include <vector>

namespace optiflow::hw_runner {

/// Whether this process is a rank of a job started by mpirun (Open MPI, MPICH/PMI) or srun.
bool inside_mpi_job();

struct LaunchOptions {
  int np = 0;
  std::string hostfile;  ///< empty: every rank on this host (oversubscribed where needed)
  /// The launcher and its extra arguments; OPTIFLOW_MPIRUN and OPTIFLOW_MPIRUN_ARGS (split at
  /// spaces) override them.
  std::string mpirun = "mpirun";
  std::vector<std::string> extra_args;
  /// The launcher is killed after this long (0: no limit): the last resort when every rank's
  /// own timeout failed.
  double job_timeout_s = 0;
  /// The job's standard output and error go to this file (truncated first); empty: they are
  /// this process's.
  std::string output;
};

/// The launcher's command line that runs `command` on every rank.
std::vector<std::string> mpirun_command(const LaunchOptions& options,
                                        const std::vector<std::string>& command);

/// This executable and its arguments, as the kernel started it (Linux /proc/self).
std::vector<std::string> own_command_line();

/// Runs the launcher, waits for it, and returns its exit status; a launcher killed by a signal
/// or by the job timeout is reported on stderr and returns 128 + signal / kTimedOut.
int launch(const LaunchOptions& options, const std::vector<std::string>& command);

}  // namespace optiflow::hw_runner
