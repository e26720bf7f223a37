// Running one schedule on real hardware from another command: `optiflow run` started under the
// launcher, one process per rank, and its measurements read back. Shared by `calibrate` and
// `explore --hw`.
#pragma once

#include <cstdint>
#include <filesystem>
#include <string>
#include <vector>

#include "optiflow/schedule/schedule.hpp"

namespace optiflow::cli {

struct HwRun {
  std::string backend = "mpi";  ///< mpi | nccl
  std::string topology;         ///< the run's --topo: a built-in name or a topology JSON file
  std::vector<std::uint64_t> sizes;
  int iters = 20;  ///< timed iterations per size (warm-up: `optiflow run`'s default)
  /// Where `optiflow run` stores the measurements (hw_results, by schedule hash); empty: nothing
  /// is stored.
  std::string db;
  std::filesystem::path work;  ///< a directory of the caller's for the job's files
  /// The job's output goes to this file, and its last lines into the error of a failed job;
  /// empty: the job writes to this process's output.
  std::filesystem::path log;
  double job_timeout_s = 600;  ///< the launcher is killed after this long
};

/// Runs `schedule` with `run.backend` on as many ranks as it has and returns its measured time
/// per size, in the order of run.sizes. Throws std::runtime_error saying why when the job
/// fails (a rank failed or timed out, the data came out wrong, no GPU) or reports no time for
/// some size.
std::vector<double> run_on_hardware(const schedule::Schedule& schedule, const HwRun& run);

}  // namespace optiflow::cli
