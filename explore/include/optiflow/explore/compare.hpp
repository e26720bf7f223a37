// Comparison studies (`optiflow compare`): OptiFlow's best stored schedules, NCCL's algorithms
// and schedules from files, on one topology, collective and cost model, each against the
// lower bound and NCCL's tuner, with the time each took to build; stored in the database and
// drawn as a bandwidth plot (docs/compare.md).
#pragma once

#include <cstdint>
#include <functional>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "optiflow/schedule/schedule.hpp"
#include "optiflow/sim/simulator.hpp"
#include "optiflow/support/collective.hpp"
#include "optiflow/support/size_result.hpp"

namespace optiflow::explore {

/// A schedule the caller brings (an MSCCL XML or schedule JSON file, a compiled program).
struct ScheduleContender {
  std::string name;
  schedule::Schedule schedule;
  double synthesis_s = 0;  ///< what making it took here (compiling a program), 0 for a file
  std::string status;      ///< where it came from
};

struct CompareOptions {
  std::string topology = "a100x4";  ///< built-in name or topology JSON file
  support::Collective collective = support::Collective::all_gather;
  std::vector<std::uint64_t> sizes;  ///< empty: sizes_or_default (sweep.hpp)
  /// Contenders in order: "ours" (the best stored schedules), a baseline name
  /// (baselines::baseline_names()), or the name of one of `schedules`.
  std::vector<std::string> with = {"ours", "nccl"};
  std::vector<ScheduleContender> schedules;
  sim::Model model = sim::Model::alpha_beta;
  std::string db_path = "optiflow.db";
  bool store = true;  ///< record the comparison in the database
  /// The synthesizers' (taccl, teccl, forestcoll) limit per solver call, in seconds.
  double synthesis_time_limit_s = 600;
  /// Called with the synthesizers' progress lines (nullptr: quiet).
  std::function<void(const std::string&)> progress;
};

struct Contender {
  std::string name;
  double synthesis_s = 0;                    ///< time to build (search, construction or compile)
  std::string status;                        ///< how it was built, one line
  std::vector<support::SizeResult> results;  ///< per size, with the bound
  std::vector<std::string> choices;  ///< per size, what ran: "ring/LL128", "program #12 (LL)"
};

struct Comparison {
  std::int64_t id = 0;  ///< in the database; 0 when not stored
  std::string topology;
  support::Collective collective = support::Collective::all_gather;
  sim::Model model = sim::Model::alpha_beta;
  int ranks = 0;
  std::vector<std::uint64_t> sizes;
  std::vector<double> bound_us;  ///< per size
  std::vector<double> nccl_us;   ///< per size: NCCL's tuner; empty where it cannot be built
  std::vector<Contender> contenders;
};

/// Builds and simulates every contender. Throws support::InputError for a contender it does
/// not know, "ours" with nothing stored for the topology and collective, or a baseline that
/// does not build there.
Comparison compare(const CompareOptions& options);

/// `{"topology", "collective", "model", "ranks", "sizes", "bound_us", "contenders": [{"name",
/// "synthesis_s", "status", "results": [{"size_bytes", "time_us", "algbw_GBps", "busbw_GBps",
/// "x_bound", "vs_nccl", "choice"}]}]}` (vs_nccl null where NCCL does not build).
std::string comparison_json(const Comparison& comparison);
/// A comparison as comparison_json writes it (from any tool that writes the same fields:
/// bench/study.py assembles its synthesizers' best settings this way); NCCL's times are the
/// contender named "nccl", where there is one. InputError naming `source` and the field.
Comparison read_comparison_json(std::string_view text, const std::string& source);
/// One row per contender and size: contender, size_bytes, time_us, algbw_GBps, busbw_GBps,
/// x_bound, vs_nccl, synthesis_s, choice.
std::string comparison_csv(const Comparison& comparison);
/// Bus bandwidth against size (log axis), one labelled line per contender, the bound dashed.
std::string bandwidth_plot_svg(const Comparison& comparison);

/// An SVG picture as PNG bytes, `scale` pixels per SVG pixel (librsvg + cairo). Throws
/// InputError when the SVG cannot be read or rendered.
std::string svg_to_png(const std::string& svg, double scale = 2.0);

}  // namespace optiflow::explore
