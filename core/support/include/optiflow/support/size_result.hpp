// How a collective did at one buffer size: the one per-size result that the simulator, the
// store, the proposers, explore, compare and the GUI pass to each other.
#pragma once

#include <cstdint>

#include "optiflow/support/collective.hpp"
#include "optiflow/support/units.hpp"

namespace optiflow::support {

struct SizeResult {
  std::uint64_t size_bytes = 0;  ///< output buffer per rank (nccl-tests convention)
  double time_us = 0;
  double algbw_GBps = 0;  ///< size / time
  double busbw_GBps = 0;  ///< algbw x the collective's bus factor (busbw_factor)
  double bound_us = 0;    ///< the lower bound at this size; 0 where it is not known
  bool measured = false;  ///< timed on hardware; otherwise simulated

  /// time / lower bound (1 = the network's limit); 0 where the bound is not known.
  double x_bound() const { return bound_us > 0 ? time_us / bound_us : 0; }
};

/// The result of `time_us` at `size_bytes`, with its bandwidths (zero when the time is zero).
inline SizeResult size_result(Collective collective, int ranks, std::uint64_t size_bytes,
                              double time_us) {
  SizeResult r;
  r.size_bytes = size_bytes;
  r.time_us = time_us;
  if (time_us > 0) {
    r.algbw_GBps = GBps_of(static_cast<double>(size_bytes), time_us);
    r.busbw_GBps = r.algbw_GBps * busbw_factor(collective, ranks);
  }
  return r;
}

}  // namespace optiflow::support
