// The synthesizer baselines (TACCL, TE-CCL, ForestColl), re-implemented on open solvers: each
// builds a schedule for a topology and a collective, and reports what its solver did, so that a
// comparison can say how long synthesis took and how far from optimal the solver stopped.
#pragma once

#include <functional>
#include <optional>
#include <string>
#include <vector>

#include "optiflow/schedule/schedule.hpp"
#include "optiflow/support/collective.hpp"
#include "optiflow/topology/taccl_topology.hpp"
#include "optiflow/topology/topology.hpp"

namespace optiflow::baselines {

/// What the solver of a synthesizer did, summed over its stages.
struct SolverReport {
  std::string solver;         ///< e.g. "CBC 2.10.8", "CLP 1.17.7"
  std::string status;         ///< "optimal", "feasible (time limit)", ...
  std::optional<double> gap;  ///< relative MIP gap at the end, where a MIP was solved
  double seconds = 0;         ///< wall time of the whole synthesis
  /// One line: "CBC 2.10.8 optimal, gap 0.00%, 1.24 s".
  std::string summary() const;
};

enum class TecclMode {
  milp,   ///< the full mixed-integer program
  lp,     ///< its linear relaxation (fractional chunks), rounded into a schedule
  astar,  ///< round by round: a few epochs at a time, each round's demands carried on
};

enum class TecclEpoch { fastest, slowest };  ///< the link that sets TE-CCL's epoch length

struct SynthesisOptions {
  /// Wall-clock limit of each solver call (CBC's seconds); the best solution found so far is
  /// kept and its gap reported.
  double time_limit_s = 600;
  /// Stop a MIP once its relative gap is below this.
  double gap_limit = 0.0;
  /// Stop a MIP after this many branch-and-bound nodes, the best solution so far kept: a limit
  /// that, unlike time, gives the same schedule on any machine. Unset: none.
  std::optional<int> max_nodes;
  /// Called with one line per stage and solver progress (nullptr: quiet).
  std::function<void(const std::string&)> progress;
  /// TACCL's sketch JSON (baseline taccl); empty: a default sketch derived from the topology.
  std::string taccl_sketch;
  /// TACCL's own link costs (baseline taccl, when the topology was read from TACCL's topology
  /// JSON): the synthesizer then uses them as TACCL does instead of deriving its own.
  std::optional<topology::TacclProfile> taccl_profile;
  /// TE-CCL's mode and epoch link; absent: milp with the fastest link on one host, astar with
  /// the slowest across hosts (where the full MILP is beyond CBC, docs/baselines.md).
  std::optional<TecclMode> teccl_mode;
  std::optional<TecclEpoch> teccl_epoch;
  /// TE-CCL's chunks per GPU (its `num_chunks`); 0: the synthesizer's default. Negative:
  /// std::invalid_argument (not an input error: the caller checks what its user gave).
  int teccl_chunks = 0;
  /// TACCL's chunks per GPU (the sketch's input_chunkup); 0: the sketch's.
  int taccl_chunks = 0;
  /// TACCL's instances (MSCCL's: the schedule replicated on channels of its own, each copy on
  /// a part of every chunk), as TACCL's evaluation sweeps them; 1: one.
  int taccl_instances = 1;
};

/// A synthesized schedule (not yet verified) and what its solver reported.
struct Synthesized {
  schedule::Schedule schedule;
  SolverReport solver;
  std::vector<std::string> notes;  ///< how it was built, one line each
};

/// Spanning-tree packing at the cut bound's rate (ForestColl, arXiv 2402.06787).
Synthesized forestcoll_synthesize(const topology::Topology& topology,
                                  support::Collective collective, const SynthesisOptions& options);

/// TACCL's three stages (Shah et al., NSDI'23): a routing MILP over the communication sketch,
/// the greedy ordering heuristic and the contiguity/scheduling MILP, on CBC (All-Gather).
Synthesized taccl_synthesize(const topology::Topology& topology, support::Collective collective,
                             const SynthesisOptions& options);

/// `built` as `instances` MSCCL instances (schedule::replicate_instances), with a note saying
/// so: how taccl_synthesize applies SynthesisOptions::taccl_instances, and how a caller sweeps
/// them over one synthesis.
Synthesized with_instances(Synthesized built, int instances);

/// TE-CCL's epoch-based multi-commodity-flow All-Gather (SIGCOMM'24): copy at GPUs and
/// switches, the early-delivery objective, solved as options.teccl_mode says (CBC, CLP).
Synthesized teccl_synthesize(const topology::Topology& topology, support::Collective collective,
                             const SynthesisOptions& options);

}  // namespace optiflow::baselines
