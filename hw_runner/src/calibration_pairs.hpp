// What the ping-pong calibrations of both backends share: the pair schedule (every pair a < b
// at every size, one pair at a time) and the gather of the samples to rank 0. Each backend
// supplies only the ping-pong itself. Internal to hw_runner.
#pragma once

#include <cstdint>
#include <functional>
#include <string>
#include <vector>

#include "mpi_support.hpp"
#include "optiflow/hw_runner/calibrate.hpp"

namespace optiflow::hw_runner::detail {

/// One pair's ping-pong of `bytes`, called on both of its ranks: warm-up, then the timed round
/// trips. Returns the one-way time (round trip / 2) on the measuring rank (the pair's first,
/// a); the value on the other rank is ignored. `what` names the pair, for timeout messages.
using PingPong =
    std::function<double(int peer, bool measuring, std::uint64_t bytes, const std::string& what)>;

/// Runs `ping_pong` for every pair a < b and every size, the other ranks waiting at a barrier,
/// under the watchdog (options.timeout_s + watchdog_grace_s per pair and size: a backend that
/// times its own operations out gives itself the grace to report first). Returns the samples on
/// rank 0, both directions of a pair with the same time; empty on the other ranks.
std::vector<PairSample> measure_pairs(const MpiSession& session, Watchdog& watchdog,
                                      const CalibrationOptions& options, double watchdog_grace_s,
                                      const PingPong& ping_pong);

}  // namespace optiflow::hw_runner::detail
