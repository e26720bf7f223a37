// Default routes: the cheapest path between two nodes, shared by the compiler and the simulator.
#pragma once

#include <map>
#include <span>
#include <utility>
#include <vector>

#include "optiflow/topology/topology.hpp"

namespace optiflow::topology {

/// Cheapest paths where each link costs its alpha plus the time to move 1 MiB over it, so
/// faster link classes win unless a path is much longer. Where equally cheap paths part at a
/// switch (a leaf reaching a leaf through any of several spines), the path to rank r takes
/// the (r mod k)-th of those k switches, as InfiniBand's fat-tree routing (destination mod k)
/// does: transfers to different destinations spread over the spines instead of all crossing
/// the first. Deterministic; shortest-path trees are cached per (source, avoided links).
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
  struct Tree {
    std::vector<std::int64_t> via;  ///< per node, the link it is first reached by; -1: none
    std::vector<double> dist;
  };
  const Tree& tree(NodeId from, std::span<const LinkId> avoided);
  /// The link that reaches `v` on a cheapest path of `t`, spread over switches by `spread`.
  LinkId link_into(const Tree& t, NodeId v, std::span<const LinkId> avoided,
                   std::size_t spread) const;

  const Topology& topology_;
  std::vector<double> cost_;
  std::map<std::pair<NodeId, std::vector<LinkId>>, Tree> trees_;
};

}  // namespace optiflow::topology
