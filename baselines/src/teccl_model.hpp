// The pieces of the TE-CCL baseline (teccl.cpp): the topology as TE-CCL's epoch model sees it,
// the time-expanded All-Gather program over a window of epochs, and the COIN-OR solvers.
#pragma once

#include <climits>
#include <map>
#include <string>
#include <vector>

#include "mip.hpp"
#include "optiflow/baselines/synthesis.hpp"
#include "optiflow/schedule/epoch_transfers.hpp"
#include "optiflow/topology/topology.hpp"

namespace optiflow::baselines::teccl {

constexpr int kNever = INT_MAX / 4;

/// One direction of a link in epochs. A chunk sent on it in epoch t can be forwarded by its
/// far end from epoch t + delay: 1 + alpha + beta epochs, except into a GPU from a switch,
/// which TE-CCL takes as instantaneous (alpha only; switch_to_gpu_link_on = false).
struct Arc {
  topology::LinkId link = 0;
  topology::NodeId from = 0, to = 0;
  double chunks_per_epoch = 0;  ///< bandwidth x epoch length, in chunks
  int beta = 0;                 ///< extra epochs one chunk takes: ceil(1 / chunks_per_epoch) - 1
  int delay = 1;
};

/// The topology in TE-CCL's terms: GPUs buffer and copy; every other node (NVSwitch, NIC,
/// leaf, spine) is a switch that copies but stores nothing. Commodity q is chunk q % K of rank
/// q / K, the IR's chunk q.
struct Fabric {
  int ranks = 0;
  int chunks_per_rank = 1;
  std::vector<bool> is_gpu;  ///< per node
  std::vector<topology::NodeId> node_of_rank;
  std::vector<Arc> arcs;
  std::vector<std::vector<int>> in_arcs, out_arcs;  ///< per node
  double epoch_GBps = 0;                            ///< the link whose one chunk takes one epoch
  int max_delay = 1;
  /// reach[u][v]: the earliest epoch v can pass on a chunk that u can pass on in epoch 0.
  std::vector<std::vector<int>> reach;

  int commodities() const { return ranks * chunks_per_rank; }
  int source_rank(int q) const { return q / chunks_per_rank; }
  topology::NodeId source_node(int q) const {
    return node_of_rank[static_cast<std::size_t>(source_rank(q))];
  }
};

/// `chunk_bytes` decides only which alphas count: TE-CCL ignores an alpha under 0.1 epoch.
Fabric make_fabric(const topology::Topology& topology, int chunks_per_rank, TecclEpoch epoch,
                   double chunk_bytes);

/// One chunk (commodity q) on one arc, leaving in epoch `epoch`.
struct Flow {
  int q = 0, arc = 0, epoch = 0;
  auto operator<=>(const Flow&) const = default;
};

/// What is known before a window: the flows already decided, and from them each GPU's arrival
/// epoch per commodity (kNever if none), the epochs each switch can pass each commodity on,
/// and each arc's load per epoch.
class State {
 public:
  explicit State(const Fabric& fabric);
  void add(const Flow& flow);
  int arrival(int q, topology::NodeId gpu) const { return arrival_[slot(q, gpu)]; }
  const std::vector<int>& switch_epochs(int q, topology::NodeId node) const {
    return switch_at_[slot(q, node)];
  }
  int load(int arc, int epoch) const;
  /// Commodity-GPU pairs still without an arrival.
  int missing() const;
  /// The last arrival epoch (the collective's length in epochs) once nothing is missing.
  int last_arrival() const;
  /// The earliest epoch `node` could pass on commodity q, from what is known.
  int earliest(int q, topology::NodeId node) const;
  const std::vector<Flow>& flows() const { return flows_; }
  const Fabric& fabric() const { return *fabric_; }

 private:
  std::size_t slot(int q, topology::NodeId node) const {
    return static_cast<std::size_t>(q) * fabric_->is_gpu.size() + node;
  }
  const Fabric* fabric_;
  std::vector<int> arrival_;
  std::vector<std::vector<int>> switch_at_;
  std::vector<std::vector<int>> load_;  ///< [arc][epoch]
  std::vector<Flow> flows_;
};

enum class Goal {
  all_by_horizon,  ///< every demand met by the horizon (the MILP, the LP)
  feasible_only,   ///< the same, any solution (the epoch search's probes)
  progress,        ///< A*: reward what arrives and how close chunks get; nothing required
};

/// One window's program: flows in epochs [first, end), arrivals counted up to `horizon`.
struct Window {
  int first = 0, end = 0, horizon = 0;
  Goal goal = Goal::all_by_horizon;
};

struct Solved {
  mip::Solution solution;
  std::vector<Flow> flows;     ///< integer flows (MILP), or those with a positive value (LP)
  std::vector<double> values;  ///< per flow: its value in the solution
  int columns = 0, rows = 0;
  mip::Status status() const { return solution.status; }
  bool found() const { return solution.found(); }
  /// The relative gap, 0 when optimal: TE-CCL's reports have always said 0 for a proven
  /// optimum, even where CBC stopped within its cutoff increment.
  double gap() const { return status() == mip::Status::optimal ? 0 : solution.gap(); }
};

/// Completes `state` epoch by epoch from `first_epoch`: each epoch, every GPU that holds a
/// chunk sends it to a GPU that lacks it, along a path through switches, wherever every link
/// of the path has room; a path shares the links that a copy of the same chunk takes at the
/// same epoch (copy at switches). Candidates go in the order of `guide` (the LP's flow values
/// summed along the path; 0 where it has none), then the shortest path.
/// Stops before `stop_epoch` (what was reserved past it stays) if that comes first.
using Guide = std::map<Flow, double>;
void round_greedily(State& state, int first_epoch, const Guide& guide, int stop_epoch = kNever);

/// The GPU-to-GPU transfers that deliver every commodity, traced back from each GPU's arrival
/// through the switches (flows that deliver nothing are left out), in epoch order.
std::vector<schedule::EpochTransfer> transfers_of(const State& state);

/// Builds the window's program on top of `state` and solves it: with CBC (integer), time and
/// gap limited, or with CLP (its linear relaxation).
Solved solve_window(const State& state, const Window& window, bool integer,
                    const SynthesisOptions& options);

}  // namespace optiflow::baselines::teccl
