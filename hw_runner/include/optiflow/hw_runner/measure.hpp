// The nccl-tests measurement protocol shared by the backends: per size, one checked execution,
// warm-up iterations, a barrier, timed iterations; the time is the slowest rank's mean, algbw
// and busbw follow nccl-tests' PERFORMANCE.md, and #wrong counts wrong elements over all ranks.
#pragma once

#include <cstdint>
#include <functional>
#include <string>
#include <vector>

#include "optiflow/schedule/schedule.hpp"

namespace optiflow::hw_runner {

struct RunOptions {
  std::vector<std::uint64_t> sizes;  ///< collective sizes S in bytes (rounded per round_size)
  int warmup_iters = 5;
  int iters = 20;
  /// How long a rank may wait for one execution (or one barrier) before the job is aborted.
  double timeout_s = 30;
  bool native = true;  ///< also measure the library's own collective
  /// MPI backend: the algorithm Open MPI's native collective must use (its coll/tuned name,
  /// e.g. "ring"), so that the schedule and the library run the same one; empty: its choice.
  std::string native_algorithm;
  /// Fault injection for the runner's own tests: this rank stops (sleeps) / crashes (aborts)
  /// before its first execution. -1: none.
  std::int32_t hang_rank = -1;
  std::int32_t crash_rank = -1;
};

/// One collective measured at one size.
struct Measurement {
  std::string name;  ///< the schedule's name, or "MPI_Allgather", "ncclAllGather", ...
  double time_us = 0;
  double algbw_GBps = 0;
  double busbw_GBps = 0;
  std::uint64_t wrong = 0;  ///< wrong elements summed over ranks; nonzero: not a result
  bool measured = false;    ///< false: not timed (wrong data, or native skipped)
};

struct SizeResult {
  std::uint64_t size_bytes = 0;
  std::uint64_t elements = 0;  ///< 4-byte elements in S
  Measurement schedule, native;
};

/// Where a job runs, for the table's header and the stored host_info.
struct JobInfo {
  std::string backend;  ///< "mpi" | "nccl"
  std::int32_t ranks = 0;
  std::vector<std::string> hosts;  ///< per rank
  std::string library;             ///< "Open MPI v4.1.4", "NCCL 2.28.9, CUDA 13.0", ...
  std::string devices;             ///< GPUs per rank (NCCL), empty for MPI
};

/// Receives the job's results on rank 0, as they are measured.
struct Reporter {
  std::function<void(const JobInfo&)> on_start;
  std::function<void(const SizeResult&)> on_size;
};

/// algbw = S / time, busbw = algbw * busbw_factor (GB/s from bytes and microseconds).
Measurement make_measurement(std::string name, support::Collective collective, std::int32_t ranks,
                             std::uint64_t size_bytes, double time_us, std::uint64_t wrong);

/// The text table, nccl-tests style, with the native collective beside the schedule.
std::string table_header(const JobInfo& job, const schedule::Schedule& schedule,
                         const RunOptions& options, const std::string& native_name);
std::string table_row(const SizeResult& result);

/// Exit statuses of a job: 0 measured, kWrongData when some size produced wrong data.
constexpr int kWrongData = 3;
constexpr int kTimedOut = 124;
constexpr int kNoDevice = 77;  ///< the NCCL backend found no GPU (a skip, not a failure)

}  // namespace optiflow::hw_runner
