#include "optiflow/topology/topology_summary.hpp"

#include <algorithm>
#include <map>
#include <tuple>

namespace optiflow::topology {

std::string format_rank_ranges(const std::vector<int>& sorted_ranks) {
  std::string out;
  for (std::size_t i = 0; i < sorted_ranks.size();) {
    std::size_t j = i;
    while (j + 1 < sorted_ranks.size() && sorted_ranks[j + 1] == sorted_ranks[j] + 1) ++j;
    if (!out.empty()) out += ',';
    out += std::to_string(sorted_ranks[i]);
    if (j > i) out += '-' + std::to_string(sorted_ranks[j]);
    i = j + 1;
  }
  return out;
}

std::string describe_gpus(const Topology& topology, const std::vector<NodeId>& nodes) {
  std::vector<int> ranks;
  for (NodeId n : nodes)
    if (topology.node(n).kind == NodeKind::gpu) ranks.push_back(topology.node(n).rank);
  std::sort(ranks.begin(), ranks.end());
  return (ranks.size() == 1 ? "rank " : "ranks ") + format_rank_ranges(ranks);
}

TopologySummary summarize(const Topology& topology) {
  TopologySummary summary;
  summary.ranks = topology.rank_count();
  summary.hosts = topology.host_count();
  for (const Node& n : topology.nodes()) {
    switch (n.kind) {
      case NodeKind::gpu:
        ++summary.gpus;
        break;
      case NodeKind::nic:
        ++summary.nics;
        break;
      case NodeKind::switch_:
        ++summary.switches;
        break;
      case NodeKind::cpu:
        ++summary.cpus;
        break;
    }
  }

  std::map<std::tuple<double, int, double>, int> classes;  // (-bw, kind, alpha) -> count
  for (const Link& l : topology.links())
    ++classes[{-l.bw_GBps, static_cast<int>(l.kind), l.alpha_us}];
  for (const auto& [key, count] : classes) {
    const auto& [neg_bw, kind, alpha] = key;
    summary.link_classes.push_back(LinkClass{static_cast<LinkKind>(kind), -neg_bw, alpha, count});
  }

  std::map<std::pair<double, double>, std::vector<int>> groups;
  for (NodeId gpu : topology.gpus_by_rank()) {
    double in = 0, out = 0;
    for (LinkId l : topology.in_links(gpu)) in += topology.link(l).bw_GBps;
    for (LinkId l : topology.out_links(gpu)) out += topology.link(l).bw_GBps;
    groups[{in, out}].push_back(topology.node(gpu).rank);
  }
  for (auto& [figures, ranks] : groups) {
    std::sort(ranks.begin(), ranks.end());
    summary.gpu_bandwidth.push_back(GpuBandwidthGroup{
        format_rank_ranges(ranks), static_cast<int>(ranks.size()), figures.first, figures.second});
  }
  std::sort(summary.gpu_bandwidth.begin(), summary.gpu_bandwidth.end(),
            [](const auto& a, const auto& b) { return std::stoi(a.ranks) < std::stoi(b.ranks); });
  return summary;
}

}  // namespace optiflow::topology
