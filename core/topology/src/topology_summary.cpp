#include "optiflow/topology/topology_summary.hpp"

#include <algorithm>
#include <map>
#include <tuple>

#include "optiflow/support/strings.hpp"

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

namespace {

// The GPUs a node stands for: itself, or those a NIC serves.
std::vector<int> ranks_at(const Topology& topology, NodeId node) {
  const Node& n = topology.node(node);
  if (n.kind == NodeKind::gpu) return {n.rank};
  std::vector<int> ranks;
  if (n.kind != NodeKind::nic) return ranks;
  for (LinkId l : topology.in_links(node))
    if (const Node& src = topology.node(topology.link(l).src); src.kind == NodeKind::gpu)
      ranks.push_back(src.rank);
  for (LinkId l : topology.out_links(node))
    if (const Node& dst = topology.node(topology.link(l).dst); dst.kind == NodeKind::gpu)
      ranks.push_back(dst.rank);
  return ranks;
}

// Per class (kind, latency), the bandwidth most of its links carry; the links that carry
// another.
std::vector<DeviantLink> deviant_links(const Topology& topology) {
  using Class = std::pair<int, double>;
  std::map<Class, std::map<double, int>> bandwidths;
  for (const Link& l : topology.links())
    ++bandwidths[{static_cast<int>(l.kind), l.alpha_us}][l.bw_GBps];
  std::map<Class, double> usual;
  for (const auto& [c, counts] : bandwidths) {
    int most = 0;
    for (const auto& [bw, count] : counts)  // ascending bandwidth: a tie goes to the faster
      if (count >= most) std::tie(usual[c], most) = std::pair{bw, count};
  }
  auto deviates = [&](const Link& l) {
    return l.bw_GBps != usual[{static_cast<int>(l.kind), l.alpha_us}];
  };
  std::vector<DeviantLink> out;
  for (LinkId id = 0; id < topology.link_count(); ++id) {
    const Link& l = topology.link(id);
    if (!deviates(l)) continue;
    // A pair each way is listed once, at its first link.
    const std::vector<LinkId> back_links = topology.out_links(l.dst);
    const auto reverse = std::ranges::find_if(back_links, [&](LinkId r) {
      const Link& back = topology.link(r);
      return back.dst == l.src && back.kind == l.kind && back.bw_GBps == l.bw_GBps &&
             back.alpha_us == l.alpha_us;
    });
    const bool both_ways = reverse != back_links.end();
    if (both_ways && *reverse < id) continue;
    std::vector<int> ranks = ranks_at(topology, l.src);
    std::ranges::copy(ranks_at(topology, l.dst), std::back_inserter(ranks));
    std::ranges::sort(ranks);
    ranks.erase(std::unique(ranks.begin(), ranks.end()), ranks.end());
    out.push_back(DeviantLink{topology.node(l.src).id, topology.node(l.dst).id, both_ways, l.kind,
                              l.bw_GBps, usual[{static_cast<int>(l.kind), l.alpha_us}],
                              format_rank_ranges(ranks)});
  }
  return out;
}

}  // namespace

std::string DeviantLink::describe() const {
  std::string whose;
  if (!ranks.empty())
    whose = (ranks.find_first_of(",-") == std::string::npos ? ", rank " : ", ranks ") + ranks;
  return support::strprintf("%s %s %s (%s%s): %.3g GB/s, %.2f of its class's %.3g GB/s",
                            from.c_str(), both_ways ? "<->" : "->", to.c_str(),
                            std::string(to_string(kind)).c_str(), whose.c_str(), bw_GBps,
                            fraction(), class_bw_GBps);
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
  summary.deviant_links = deviant_links(topology);
  return summary;
}

}  // namespace optiflow::topology
