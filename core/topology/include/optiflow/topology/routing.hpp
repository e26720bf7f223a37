// Default routes: the cheapest path between two nodes, shared by the compiler and the simulator.
#pragma once

#include <map>
#include <span>
#include <utility>
#include <vector>

#include "optiflow/topology/topology.hpp"

namespace optiflow::topology {

/// Cheapest paths where each link costs its alpha plus the time to move 1 MiB over it, so
/// faster link classes win unless a path is much longer. Deterministic; shortest-path trees
/// are cached per (source, avoided links).
class Router {
 public:
  static constexpr double kReferenceBytes = 1 << 20;

  explicit Router(const Topology& topology);

  /// Links from `from` to `to` avoiding `avoided` (sorted link ids); empty if unreachable or
  /// from == to.
  std::vector<LinkId> path(NodeId from, NodeId to, std::span<const LinkId> avoided = {});

  /// The links joining consecutive nodes of `nodes` (the lowest id where several do); empty
  /// if some pair is not linked.
  std::vector<LinkId> links_along(std::span<const NodeId> nodes) const;

 private:
  const std::vector<std::int64_t>& tree(NodeId from, std::span<const LinkId> avoided);

  const Topology& topology_;
  std::vector<double> cost_;
  std::map<std::pair<NodeId, std::vector<LinkId>>, std::vector<std::int64_t>> trees_;
};

}  // namespace optiflow::topology
