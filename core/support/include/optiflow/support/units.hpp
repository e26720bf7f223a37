// Named unit conversions. Bandwidths are in GB/s (10^9 bytes per second, as nccl-tests and
// NCCL's tuner use), times in microseconds, sizes in bytes; 1 GB/s is exactly 1000 bytes per
// microsecond.
#pragma once

namespace optiflow::support {

inline constexpr double kBytesPerUsPerGBps = 1e3;
inline constexpr double kUsPerSecond = 1e6;
inline constexpr double kUsPerMs = 1e3;

/// A time in seconds (MPI_Wtime, solvers' and TE-CCL's figures) in microseconds.
constexpr double us_of_seconds(double seconds) {
  return seconds * kUsPerSecond;
}

/// A time in milliseconds (CUDA events) in microseconds.
constexpr double us_of_ms(double ms) {
  return ms * kUsPerMs;
}

/// A bandwidth in GB/s as bytes per microsecond.
constexpr double bytes_per_us(double GBps) {
  return GBps * kBytesPerUsPerGBps;
}

/// How long `bytes` take at `GBps`, in microseconds.
constexpr double transfer_us(double bytes, double GBps) {
  return bytes / bytes_per_us(GBps);
}

/// The bandwidth in GB/s of `bytes` moved in `us` microseconds.
constexpr double GBps_of(double bytes, double us) {
  return bytes / (us * kBytesPerUsPerGBps);
}

}  // namespace optiflow::support
