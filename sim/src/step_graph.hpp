// The simulator's view of a schedule, derived from its FlatSchedule: prerequisites counted,
// each matched send turned into a routed transfer on its FIFO connection.
#pragma once

#include <cstdint>
#include <span>
#include <vector>

#include "optiflow/schedule/schedule.hpp"
#include "optiflow/topology/link_cost.hpp"
#include "optiflow/topology/topology.hpp"

namespace optiflow::sim {

using StepIndex = std::int32_t;

struct SimStep {
  std::int32_t rank = 0, tb = 0, step = 0;
  schedule::StepKind kind = schedule::StepKind::nop;
  std::int32_t prerequisites = 0;  ///< previous step of the block + deps + the message it receives
  StepIndex next_in_tb = -1;
  std::int32_t transfer = -1;       ///< the transfer this step sends, -1 if it sends nothing
  std::int32_t in_connection = -1;  ///< the connection this step receives from, -1 if none
  /// Among steps ready at one instant, the order they start in: 0 for steps that send nothing,
  /// else the receiver's distance (receiver - sender) mod N. A rank's thread blocks run at once
  /// and its links interleave them; taking their sends in rotated peer order, as NCCL's p2p
  /// schedule does, keeps the FIFO links from sending every rank to the same peer first.
  std::int32_t start_order = 0;
  std::int32_t dependents_begin = 0, dependents_end = 0;  ///< range in StepGraph::dependents
};

struct SimTransfer {
  StepIndex send_step = 0;
  StepIndex recv_step = 0;
  double fraction = 0;          ///< bytes = fraction * collective size
  std::int32_t connection = 0;  ///< the FIFO connection (sender, receiver, channel) it uses
  std::int32_t message = 0;     ///< its position among the connection's messages
  topology::RouteCost cost;
  std::int32_t route_begin = 0, route_end = 0;  ///< range in StepGraph::route_links
};

struct StepGraph {
  std::vector<SimStep> steps;
  std::vector<StepIndex> dependents;  ///< steps listing a step in their deps, grouped by step
  std::vector<SimTransfer> transfers;
  std::vector<topology::LinkId> route_links;
  std::int32_t connections = 0;

  std::span<const topology::LinkId> route(const SimTransfer& t) const {
    return std::span<const topology::LinkId>(route_links)
        .subspan(static_cast<std::size_t>(t.route_begin),
                 static_cast<std::size_t>(t.route_end - t.route_begin));
  }
};

/// Flattens a verified schedule. Throws InputError when a send has no matching receive or a
/// default route does not exist.
StepGraph build_step_graph(const topology::Topology& topology, const schedule::Schedule& schedule);

}  // namespace optiflow::sim
