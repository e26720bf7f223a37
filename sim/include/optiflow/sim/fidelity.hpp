// How well simulated times predict measured ones (docs/fidelity.md). Three questions, because a
// pre-screen is judged by the schedules it sends to the hardware, not by its error alone:
// how far off is each time (|simulated / measured - 1|); does it order the schedules that ran
// the same collective on the same ranks at the same size as the hardware did (Kendall tau);
// and is its first choice there the measured best, or how much slower is it (regret).
#pragma once

#include <cstdint>
#include <span>
#include <string>
#include <vector>

#include "optiflow/support/collective.hpp"

namespace optiflow::sim {

/// One schedule at one size, simulated and measured.
struct FidelityPoint {
  support::Collective collective = support::Collective::all_gather;
  int ranks = 0;
  std::uint64_t size_bytes = 0;
  std::string schedule;  ///< names the schedule within its group
  double simulated_us = 0, measured_us = 0;

  double error() const { return simulated_us / measured_us - 1; }
};

/// The schedules that ran one collective on the same ranks at one size.
struct GroupFidelity {
  support::Collective collective = support::Collective::all_gather;
  int ranks = 0;
  std::uint64_t size_bytes = 0;
  std::size_t schedules = 0;
  /// Over pairs of schedules: (pairs ordered alike - pairs ordered unlike) / pairs; ties in
  /// either order count as neither.
  double kendall_tau = 0;
  std::string simulator_pick, measured_best;  ///< ties: the first in the points' order
  double regret = 1;  ///< measured time of the simulator's pick / the measured best's
};

/// Within this of the measured best, a pick is as good as the best (measurement noise on a
/// quiet machine is of this order).
inline constexpr double kPickTolerance = 0.10;

struct FidelityReport {
  std::size_t points = 0;
  double median_error = 0, worst_error = 0;  ///< of |error|
  /// Groups of two or more schedules, in (collective, ranks, size) order.
  std::vector<GroupFidelity> groups;
  double median_tau = 0;
  double median_regret = 1, worst_regret = 1;
  std::size_t picks_best = 0;        ///< groups whose pick is the measured best
  std::size_t picks_within_tol = 0;  ///< groups whose regret <= 1 + kPickTolerance
};

/// The report over `points` (simulated and measured times positive). A schedule named twice in
/// one group counts once, with its first point.
FidelityReport fidelity(std::span<const FidelityPoint> points);

/// The median of `values` (0 for none).
double median(std::vector<double> values);

}  // namespace optiflow::sim
