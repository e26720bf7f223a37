#include "optiflow/topology/routing.hpp"

#include <algorithm>
#include <cmath>
#include <limits>
#include <queue>

#include "optiflow/support/units.hpp"

namespace optiflow::topology {

Router::Router(const Topology& topology) : topology_(topology), cost_(topology.link_count()) {
  for (LinkId l = 0; l < topology.link_count(); ++l)
    cost_[l] =
        topology.link(l).alpha_us + support::transfer_us(kReferenceBytes, topology.link(l).bw_GBps);
}

const Router::Tree& Router::tree(NodeId from, std::span<const LinkId> avoided) {
  auto [it, inserted] =
      trees_.try_emplace({from, std::vector<LinkId>(avoided.begin(), avoided.end())});
  Tree& t = it->second;
  if (!inserted) return t;
  t.dist.assign(topology_.node_count(), std::numeric_limits<double>::infinity());
  t.via.assign(topology_.node_count(), -1);
  using Entry = std::pair<double, NodeId>;
  std::priority_queue<Entry, std::vector<Entry>, std::greater<>> frontier;
  t.dist[from] = 0;
  frontier.push({0, from});
  while (!frontier.empty()) {
    const auto [d, v] = frontier.top();
    frontier.pop();
    if (d > t.dist[v]) continue;
    for (LinkId l : topology_.out_links(v)) {
      if (std::binary_search(avoided.begin(), avoided.end(), l)) continue;
      const NodeId w = topology_.link(l).dst;
      if (d + cost_[l] < t.dist[w]) {
        t.dist[w] = d + cost_[l];
        t.via[w] = l;
        frontier.push({t.dist[w], w});
      }
    }
  }
  return t;
}

LinkId Router::link_into(const Tree& t, NodeId v, std::span<const LinkId> avoided,
                         std::size_t spread) const {
  const auto first = static_cast<LinkId>(t.via[v]);
  auto from_switch = [&](LinkId l) {
    return topology_.node(topology_.link(l).src).kind == NodeKind::switch_;
  };
  if (!from_switch(first)) return first;
  // Sums of the same link costs in another order may differ in the last bits.
  const double tolerance = 1e-9 * t.dist[v];
  std::vector<LinkId> equal;
  for (LinkId l : topology_.in_links(v)) {
    if (!from_switch(l) || std::binary_search(avoided.begin(), avoided.end(), l)) continue;
    if (std::abs(t.dist[topology_.link(l).src] + cost_[l] - t.dist[v]) <= tolerance)
      equal.push_back(l);
  }
  return equal.size() < 2 ? first : equal[spread % equal.size()];
}

std::vector<LinkId> Router::path(NodeId from, NodeId to, std::span<const LinkId> avoided) {
  const Tree& t = tree(from, avoided);
  const Node& destination = topology_.node(to);
  const auto spread = static_cast<std::size_t>(destination.rank >= 0 ? destination.rank : to);
  std::vector<LinkId> links;
  for (NodeId v = to; v != from;) {
    if (t.via[v] < 0) return {};
    const LinkId l = link_into(t, v, avoided, spread);
    links.push_back(l);
    v = topology_.link(l).src;
  }
  std::reverse(links.begin(), links.end());
  return links;
}

std::vector<LinkId> Router::links_along(std::span<const NodeId> nodes) const {
  std::vector<LinkId> links;
  for (std::size_t i = 0; i + 1 < nodes.size(); ++i) {
    const auto out = topology_.out_links(nodes[i]);
    const auto hit = std::find_if(out.begin(), out.end(),
                                  [&](LinkId l) { return topology_.link(l).dst == nodes[i + 1]; });
    if (hit == out.end()) return {};
    links.push_back(*hit);
  }
  return links;
}

}  // namespace optiflow::topology
