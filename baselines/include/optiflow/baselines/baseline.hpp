// The baselines by name, run through the same verifier and simulator as OptiFlow's schedules.
#pragma once

#include <cstdint>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "optiflow/baselines/nccl.hpp"
#include "optiflow/baselines/synthesis.hpp"
#include "optiflow/schedule/schedule.hpp"
#include "optiflow/sim/simulator.hpp"
#include "optiflow/topology/topology.hpp"

namespace optiflow::baselines {

/// The names `optiflow baseline` takes that this library builds.
std::span<const std::string_view> baseline_names();
bool is_baseline(std::string_view name);
/// baseline_names() as one comma-separated list, for messages.
std::string baseline_list();

/// One size of a baseline: what it chose and what the simulator makes of it.
struct BaselineRow {
  std::uint64_t size_bytes = 0;
  std::string algorithm;  ///< e.g. "ring"
  topology::Protocol protocol = topology::Protocol::simple;
  int channels = 0;
  std::optional<double> model_us;  ///< the baseline's own estimate (NCCL's tuner), if it has one
  sim::SimResult sim;              ///< the simulated run, with that protocol
};

struct BaselineRun {
  std::string name;
  /// The schedule, its protocol per size as the baseline chose it (verified).
  schedule::Schedule schedule;
  std::vector<BaselineRow> rows;
  std::vector<std::string> notes;  ///< how it was built, one line each
  /// The synthesizers' (taccl, teccl, forestcoll) solver report, synthesis time included.
  std::optional<SolverReport> solver;

  /// The row for `size_bytes`, one of the sizes the run was asked for (std::logic_error
  /// otherwise: the caller's mistake).
  const BaselineRow& row_at(std::uint64_t size_bytes) const;
};

/// Whether `name` is a synthesizer (taccl, teccl, forestcoll): a solver builds its schedule.
bool is_synthesizer(std::string_view name);

/// Builds baseline `name` on `topology` for `collective`, verifies its schedule and simulates
/// it at every size with `options`. NCCL's baselines run each size with the protocol its tuner
/// picks; a synthesizer's schedule runs each size with the protocol that simulates fastest
/// (unless options.protocol forces one). Throws InputError for an unknown name, a collective
/// the baseline does not build, or a topology it cannot run on.
BaselineRun run_baseline(std::string_view name, const topology::Topology& topology,
                         support::Collective collective, std::span<const std::uint64_t> sizes,
                         sim::SimOptions options = {}, const SynthesisOptions& synthesis = {});

/// A synthesizer's schedule as run_baseline runs it: named `name`, verified (InputError if it
/// fails) and simulated at each size with the protocol that simulates fastest there (or
/// options.protocol). For a schedule built once and varied (e.g. TACCL's instances).
BaselineRun run_synthesized(std::string_view name, Synthesized built,
                            const topology::Topology& topology,
                            std::span<const std::uint64_t> sizes,
                            const sim::SimOptions& options = {});

}  // namespace optiflow::baselines
