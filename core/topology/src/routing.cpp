#include "optiflow/topology/routing.hpp"

#include <algorithm>
#include <limits>
#include <queue>

#include "optiflow/support/units.hpp"

namespace optiflow::topology {

Router::Router(const Topology& topology) : topology_(topology), cost_(topology.link_count()) {
  for (LinkId l = 0; l < topology.link_count(); ++l)
    cost_[l] =
        topology.link(l).alpha_us + support::transfer_us(kReferenceBytes, topology.link(l).bw_GBps);
}

const std::vector<std::int64_t>& Router::tree(NodeId from, std::span<const LinkId> avoided) {
  auto [it, inserted] =
      trees_.try_emplace({from, std::vector<LinkId>(avoided.begin(), avoided.end())});
  std::vector<std::int64_t>& via = it->second;
  if (!inserted) return via;
  std::vector<double> dist(topology_.node_count(), std::numeric_limits<double>::infinity());
  via.assign(topology_.node_count(), -1);
  using Entry = std::pair<double, NodeId>;
  std::priority_queue<Entry, std::vector<Entry>, std::greater<>> frontier;
  dist[from] = 0;
  frontier.push({0, from});
  while (!frontier.empty()) {
    const auto [d, v] = frontier.top();
    frontier.pop();
    if (d > dist[v]) continue;
    for (LinkId l : topology_.out_links(v)) {
      if (std::binary_search(avoided.begin(), avoided.end(), l)) continue;
      const NodeId w = topology_.link(l).dst;
      if (d + cost_[l] < dist[w]) {
        dist[w] = d + cost_[l];
        via[w] = l;
        frontier.push({dist[w], w});
      }
    }
  }
  return via;
}

std::vector<LinkId> Router::path(NodeId from, NodeId to, std::span<const LinkId> avoided) {
  const auto& via = tree(from, avoided);
  std::vector<LinkId> links;
  for (NodeId v = to; v != from;) {
    if (via[v] < 0) return {};
    links.push_back(static_cast<LinkId>(via[v]));
    v = topology_.link(static_cast<LinkId>(via[v])).src;
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
