// The simulator's view of a schedule, derived from its FlatSchedule: prerequisites counted,
// each matched send turned into a routed transfer on its FIFO connection. Built once per
// schedule, independent of size; every run works on these flat arrays.
//
// Steps are stored in run order. For large schedules (a million steps) that is a wavefront
// (topological) order rather than the schedule's (rank, block, step) order: the steps running
// at one instant then lie close together, which keeps them in cache. Anything that depends on the
// schedule's order (ties between steps ready at one instant, the first step that stalls, the
// timeline) uses schedule_index().
#pragma once

#include <algorithm>
#include <cstdint>
#include <span>
#include <vector>

#include "optiflow/schedule/schedule.hpp"
#include "optiflow/topology/link_cost.hpp"
#include "optiflow/topology/topology.hpp"

namespace optiflow::sim {

using StepIndex = std::int32_t;  ///< a step in run order

/// What the event loop reads of a step, in one place (28 bytes, no padding: a million-step
/// graph is read from memory).
struct SimStep {
  /// Among steps ready at one instant, the order they start in (start_key()): first those that
  /// send nothing (start_order 0), then sends by the receiver's distance (receiver - sender) mod
  /// N, then by schedule order. A rank's thread blocks run at once and its links interleave
  /// them; taking their sends in rotated peer order, as NCCL's p2p schedule does, keeps the FIFO
  /// links from sending every rank to the same peer first.
  std::uint32_t start_order = 0;
  std::uint32_t schedule_index = 0;  ///< its place in the schedule's (rank, block, step) order
  StepIndex next_in_tb = -1;
  std::int32_t transfer = -1;       ///< the transfer this step sends, -1 if it sends nothing
  std::int32_t in_connection = -1;  ///< the connection this step receives from, -1 if none
  std::int32_t dependents_begin = 0, dependents_end = 0;  ///< range in StepGraph::dependents
};
static_assert(sizeof(SimStep) == 28);

inline std::uint64_t start_key(const SimStep& step) {
  return std::uint64_t{step.start_order} << 32 | step.schedule_index;
}

/// Where a step is in the schedule, for reports.
struct StepName {
  std::int32_t rank = 0, tb = 0, step = 0;
  schedule::StepKind kind = schedule::StepKind::nop;
};

/// A thread block: its steps are schedule indices [first, next block's first).
struct BlockName {
  std::uint32_t first = 0;
  std::int32_t rank = 0, tb = 0;
};

/// A route used by some transfers, with its size-independent cost.
struct SimRoute {
  std::int32_t links_begin = 0, links_end = 0;  ///< range in StepGraph::route_links
  topology::RouteCost cost;
};

struct SimTransfer {
  StepIndex send_step = 0;
  StepIndex recv_step = 0;
  double fraction = 0;          ///< bytes = fraction * collective size
  std::int32_t connection = 0;  ///< the FIFO connection (sender, receiver, channel) it uses
  std::int32_t message = 0;     ///< its position among the connection's messages
  std::int32_t route = 0;       ///< index in StepGraph::routes
};

struct StepGraph {
  std::vector<SimStep> steps;  ///< in run order
  /// Per step: the previous step of its block + its deps + the message it receives. Apart from
  /// the steps, as a run reads it once, to start its own counts.
  std::vector<std::int32_t> prerequisites;
  /// The steps without prerequisites, in the order they start (by start_key()).
  std::vector<StepIndex> initially_ready;
  // Only reports read these (name()): the blocks and each step's kind, in schedule order.
  std::vector<BlockName> blocks;
  std::vector<schedule::StepKind> kinds;
  std::vector<StepIndex> run_index;    ///< schedule index -> run order; empty: the same
  std::vector<StepIndex> dependents;   ///< steps listing a step in their deps, grouped by step
  std::vector<SimTransfer> transfers;  ///< in the run order of their sends
  std::vector<SimRoute> routes;
  std::vector<topology::LinkId> route_links;
  std::int32_t connections = 0;

  std::uint32_t schedule_index(StepIndex s) const { return step(s).schedule_index; }
  const SimStep& step(StepIndex s) const { return steps[static_cast<std::size_t>(s)]; }
  StepName name(StepIndex s) const {
    const std::uint32_t i = schedule_index(s);
    const auto block =
        std::upper_bound(blocks.begin(), blocks.end(), i,
                         [](std::uint32_t id, const BlockName& b) { return id < b.first; }) -
        1;
    return StepName{block->rank, block->tb, static_cast<std::int32_t>(i - block->first), kinds[i]};
  }
  /// The step at schedule index `i`.
  StepIndex run_step(std::uint32_t i) const {
    return run_index.empty() ? static_cast<StepIndex>(i) : run_index[i];
  }
  const SimTransfer& transfer(std::int32_t id) const {
    return transfers[static_cast<std::size_t>(id)];
  }
  /// The links of route `id` (an index in routes).
  std::span<const topology::LinkId> links(std::int32_t id) const {
    const SimRoute& r = routes[static_cast<std::size_t>(id)];
    return std::span<const topology::LinkId>(route_links)
        .subspan(static_cast<std::size_t>(r.links_begin),
                 static_cast<std::size_t>(r.links_end - r.links_begin));
  }
  std::span<const topology::LinkId> route(const SimTransfer& t) const { return links(t.route); }
};

/// Flattens a verified schedule. Throws InputError when a send has no matching receive or a
/// default route does not exist.
StepGraph build_step_graph(const topology::Topology& topology, const schedule::Schedule& schedule);

}  // namespace optiflow::sim
