// Calibration of the cost model against the machine: point-to-point ping-pong between every
// pair of ranks at several sizes (MPI here; between GPUs, run_nccl_calibration of
// nccl_backend.hpp), and the least-squares fit of t = alpha + bytes / bw per pair, so a slow
// pair shows up as its own link.
#pragma once

#include <cstdint>
#include <span>
#include <vector>

namespace optiflow::hw_runner {

/// The one-way time of `bytes` from src to dst (half a round trip), mean over iterations.
struct PairSample {
  std::int32_t src = 0, dst = 0;
  std::uint64_t bytes = 0;
  double time_us = 0;
};

struct LinkFit {
  double alpha_us = 0;
  double bw_GBps = 0;
  double rms_error_us = 0;  ///< of the fit over its samples
};

/// Least squares (Eigen) of time_us = alpha_us + bytes / (bw_GBps * 1e3) over the samples of
/// one pair; needs two distinct sizes. A non-positive slope (latency-bound samples) gives
/// bandwidth 1e6 GB/s rather than a negative one; a negative intercept gives alpha 0.
LinkFit fit_alpha_beta(std::span<const PairSample> samples);

struct CalibrationOptions {
  std::vector<std::uint64_t> sizes;  ///< message sizes in bytes
  int iters = 20;
  int warmup_iters = 3;
  double timeout_s = 30;
};

/// Runs on every rank of an MPI job (initialises and finalises MPI): ping-pong between every
/// ordered pair (a < b, measured once per pair and size). Returns the samples on rank 0, both
/// directions of a pair with the same time; empty on the other ranks.
std::vector<PairSample> run_mpi_calibration(const CalibrationOptions& options);

}  // namespace optiflow::hw_runner
