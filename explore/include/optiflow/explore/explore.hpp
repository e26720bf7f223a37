// The search loop: propose -> compile -> verify -> simulate -> select -> refine, every
// candidate stored (docs/explore.md).
#pragma once

#include <cstdint>
#include <functional>
#include <optional>
#include <span>
#include <string>
#include <vector>

#include "optiflow/propose/proposer.hpp"
#include "optiflow/schedule/schedule.hpp"
#include "optiflow/sim/fidelity.hpp"
#include "optiflow/support/collective.hpp"
#include "optiflow/support/size_result.hpp"

namespace optiflow::explore {

/// TACCL joins the default floor on topologies of up to this many GPUs (one host's worth).
inline constexpr std::int32_t kDefaultFloorTacclRanks = 8;

/// The floor of a run that names none: NCCL's pick and the ForestColl-style packing, and on
/// up to kDefaultFloorTacclRanks GPUs TACCL too: there its MIPs take seconds and its schedules
/// can beat every program at mid sizes (docs/explore.md, "The floor"); on larger topologies
/// they take a minute or more.
std::vector<std::string> default_floor(std::int32_t ranks);

struct ExploreOptions {
  std::string topology = "a100x4";  ///< built-in name or topology JSON file
  support::Collective collective = support::Collective::all_gather;
  std::vector<std::uint64_t> sizes;  ///< empty: sizes_or_default (sweep.hpp)
  std::int64_t budget = 500;         ///< candidates evaluated (duplicates are free)
  double time_limit_s = 0;           ///< 0 = none; a time limit makes runs irreproducible
  std::string proposer = "offline";  ///< the name given to the ProposerFactory
  std::uint64_t seed = 1;
  std::string db_path = "optiflow.db";
  std::optional<std::int64_t> resume;  ///< continue this run (its own options apply)
  std::string out_dir = "optiflow-out";
  unsigned threads = 0;  ///< 0 = all cores; results do not depend on it
  /// Baselines whose schedules hold each size until a program beats them, so that the run's
  /// winners are never behind them: names `optiflow baseline` takes (`nccl`: its tuner's pick,
  /// at the sizes where it runs the largest size's algorithm). One that cannot be built here
  /// is left out, and ExploreResult::floor_missing says why. Unset: default_floor().
  std::optional<std::vector<std::string>> floor;
  /// The floor's synthesizers (taccl, teccl, up to 64 GPUs): seconds per solver call, a safety
  /// net behind their node limit, which keeps runs reproducible. TACCL's schedule joins with 1,
  /// 2, 4 and 8 instances, as its evaluation sweeps them.
  double floor_time_limit_s = 60;
  /// Asked after each batch: true ends the run there, as "interrupted" (resumable with
  /// `resume`); the GUI's stop button. Empty: never.
  std::function<bool()> should_stop;

  /// --hw: runs a schedule on real hardware at these sizes (on `topology`, the run's built-in
  /// name or file) and returns its measured time per size; nullopt or an exception: the
  /// measurement failed. The CLI launches `optiflow run`, which stores what it measured in
  /// hw_results. Empty: nothing is measured, and the run is what it was without it.
  using Measure = std::function<std::optional<std::vector<double>>(
      const schedule::Schedule& schedule, const std::string& topology,
      std::span<const std::uint64_t> sizes)>;
  Measure measure;
  int hw_topk = 1;         ///< with `measure`: candidates measured per batch, the best simulated
  std::string hw_backend;  ///< with `measure`: its backend, for the record (mpi | nccl)
  /// Told why a measurement failed (the run goes on with the simulated result); empty: stderr.
  std::function<void(const std::string&)> warn;

  /// Reports `message` through `warn`, or on stderr where it is unset.
  void warning(const std::string& message) const;
};

/// The best schedule found for one size.
struct SizeWinner {
  support::SizeResult simulated;  ///< in the alpha-beta model, with the bound at this size
  std::int64_t program_id = 0;    ///< 0: a baseline of the floor, which no program beat here
  std::string program_source;
  std::string baseline;        ///< the floor's baseline that holds this size; empty: a program
  double flow_busbw_GBps = 0;  ///< the same schedule in the flow model
  /// NCCL at this size: what its tuner picks, simulated in the same cost model; time 0 and no
  /// choice where the NCCL baseline does not build this collective.
  propose::NcclAtSize nccl;
  std::string schedule_path, msccl_path;
  /// With --hw: the winner's measured time (0 = not measured). Once some candidate is measured
  /// at a size, the winner there is the fastest measured one; `simulated` stays its simulation.
  double measured_time_us = 0;
};

struct ExploreResult {
  std::int64_t run_id = 0;
  std::string topology;
  std::int64_t candidates = 0;      ///< evaluated in this run, in total
  std::int64_t compiled = 0;        ///< of which compiled and verified
  std::int64_t measured = 0;        ///< with --hw: distinct schedules measured in this run
  std::int64_t measure_failed = 0;  ///< with --hw: distinct schedules whose measurement failed
  /// With --hw: this run's measurements against their simulations (sim::fidelity).
  std::optional<sim::FidelityReport> hw_fidelity;
  double seconds = 0;
  /// Why there is no NCCL column (the baseline does not build this collective); empty if there is.
  std::string nccl_missing;
  /// The floor's baselines that were not built here, each with why.
  std::vector<std::string> floor_missing;
  /// Why the run ended before its budget because the proposer stopped (a token or cost cap);
  /// empty otherwise.
  std::string stop_reason;
  /// Why the run failed (a model server that is gone, a replay without a recorded reply);
  /// empty when it did not. What was stored before stays stored; the run's status is "failed".
  std::string failure;
  std::vector<SizeWinner> winners;
};

/// What the progress display shows after each batch.
struct Progress {
  std::int64_t run_id = 0;  ///< the run in the database
  std::int64_t done = 0, budget = 0;
  double seconds = 0;
  std::vector<std::uint64_t> sizes;
  std::vector<double> best_busbw_GBps, best_bound_ratio;  ///< per size; 0 = none yet
};
using ProgressSink = std::function<void(const Progress&)>;

/// Runs (or resumes) an exploration with the proposer that `make_proposer` makes for
/// options.proposer (a resumed run's own proposer); every candidate's origin is the one its
/// proposal names. Throws support::InputError for bad options, db::DbError for storage
/// failures; whatever was committed before a failure stays committed. A proposer that cannot
/// go on (propose::ProposerError) ends the run with ExploreResult::failure set.
ExploreResult explore(const ExploreOptions& options, const propose::ProposerFactory& make_proposer,
                      const ProgressSink& progress = {});

}  // namespace optiflow::explore
