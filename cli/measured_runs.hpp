// The hardware measurements stored in SQLite files (by `optiflow run`, `explore --hw` and live
// `calibrate`), read back with their schedules: what `calibrate --from-db` fits and `fidelity`
// checks.
#pragma once

#include <string>
#include <vector>

#include "optiflow/sim/fidelity.hpp"
#include "optiflow/sim/host_model.hpp"

namespace optiflow::cli {

struct MeasuredFilter {
  std::string backend;               ///< empty: any, but all rows must share one
  std::vector<std::string> only;     ///< globs on the schedule's name; empty: every schedule
  std::vector<std::string> exclude;  ///< globs on the schedule's name
};

/// One schedule's measurements over every database (opened read-only), sizes ascending; a size
/// measured more than once keeps its least time (a quiet machine's noise only adds time).
/// Schedules of the same name but different content are told apart by their hash
/// ("ring#3976cc"). Throws InputError naming the database and field for a stored schedule that
/// does not parse, and when rows of several backends are mixed without `filter.backend`.
std::vector<sim::MeasuredSchedule> read_measured(const std::vector<std::string>& databases,
                                                 const MeasuredFilter& filter);

/// The report in one line: "median |error| ...; N groups: median Kendall tau ...; the
/// simulator's pick is the measured best in ..., within 10% of it in ...; regret ...".
std::string fidelity_summary(const sim::FidelityReport& report);

}  // namespace optiflow::cli
