// NCCL's ring search, as far as it decides what a schedule looks like: the ring order inside
// each node, how the rings cross nodes (each leaves a node on the rail it enters the next by),
// and how many channels NCCL runs (search.cc, connect.cc, v2.23.4-1; docs/baselines.md).
#include <algorithm>
#include <array>
#include <cmath>
#include <map>
#include <span>

#include "optiflow/baselines/nccl.hpp"
#include "optiflow/support/error.hpp"
#include "optiflow/topology/rings.hpp"
#include "optiflow/topology/routing.hpp"

namespace optiflow::baselines {
namespace {

using topology::Topology;

// search.cc: the per-channel speeds NCCL tries inside one node (speedArrayIntra,
// sm90SpeedArrayIntra), fastest first.
constexpr std::array<double, 13> kSpeedsIntra{40, 30, 20, 18, 15, 12, 10, 9, 7, 6, 5, 4, 3};
constexpr std::array<double, 11> kSpeedsIntraSm90{60, 50, 40, 30, 24, 20, 15, 12, 11, 6, 3};
constexpr int kMaxSearchChannels = 16;    // MAXCHANNELS / 2 (init.cc)
constexpr std::size_t kMaxChannels = 32;  // MAXCHANNELS

// A topology NCCL's rings do not run on (one rank, hosts of different sizes).
[[noreturn]] void fail(const Topology& topology, const std::string& message) {
  throw support::UnsupportedError(support::UnsupportedError::Subject::topology, message,
                                  support::SourceLocation{topology.name(), 0, 0, {}});
}

// A GPU's NVLink bandwidth out (NCCL's totalBw for a GPU inside a node); a GPU without
// NVLink, its first link's.
double gpu_out_GBps(const Topology& topology, int rank) {
  const std::vector<topology::LinkId> out = topology.out_links(topology.gpu_of_rank(rank));
  double nvlink = 0;
  for (topology::LinkId l : out) {
    const auto kind = topology.link(l).kind;
    if (kind == topology::LinkKind::nvlink || kind == topology::LinkKind::nvswitch)
      nvlink += topology.link(l).bw_GBps;
  }
  return nvlink > 0 ? nvlink : topology.link(out.front()).bw_GBps;
}

// NICs per host: the rails a multi-node ring can cross on (at least one).
int nics_per_host(const Topology& topology, int hosts) {
  std::map<int, int> count;
  for (const topology::Node& node : topology.nodes())
    if (node.kind == topology::NodeKind::nic) ++count[node.host];
  if (static_cast<int>(count.size()) < hosts) return 1;  // a host without NICs
  int fewest = count.begin()->second;
  for (const auto& [host, nics] : count) fewest = std::min(fewest, nics);
  return fewest;
}

// One node: rings at the fastest speed the GPUs' NVLinks hold, as many as fit (search.cc),
// doubled by ncclTopoDupChannels when the speed is high enough.
int single_node_search_channels(const NcclRingGraph& graph, double nvlink_GBps,
                                std::vector<std::string>& notes) {
  const std::span<const double> speeds = graph.gpu_sm >= 90
                                             ? std::span<const double>(kSpeedsIntraSm90)
                                             : std::span<const double>(kSpeedsIntra);
  double speed = speeds.back();
  for (double s : speeds)
    if (s <= nvlink_GBps) {
      speed = s;
      break;
    }
  int rings = std::clamp(static_cast<int>(std::floor(nvlink_GBps / speed)), 1, kMaxSearchChannels);
  const bool dup = speed >= 25.0 && !(graph.gpu_sm > 80 && speed < 50.0 && rings > 4);
  notes.push_back("NCCL's search: " + std::to_string(rings) + " rings at " +
                  std::to_string(static_cast<int>(speed)) + " GB/s" + (dup ? ", duplicated" : ""));
  if (dup) rings = std::min(2 * rings, kMaxSearchChannels);
  return rings;
}

// Channel c's ring on rail x = c mod ppn: every node entered at its GPU x, its GPUs in local
// order from there; the last one reaches the next node through GPU x's NIC (PXN: over NVLink
// to GPU x, then rail x), so every node boundary of the ring is on rail x.
void add_multi_node_ring(const Topology& topology, const std::vector<std::vector<int>>& hosts,
                         int channel, NcclRingGraph& graph) {
  const std::size_t ppn = hosts.front().size();
  const std::size_t rail = static_cast<std::size_t>(channel) % ppn;
  topology::Router router(topology);
  const auto gpu = [&](int rank) { return topology.gpu_of_rank(rank); };
  std::vector<int> ring;
  std::vector<std::vector<topology::LinkId>> routes;
  for (std::size_t h = 0; h < hosts.size(); ++h) {
    for (std::size_t i = 0; i < ppn; ++i) {
      const int rank = hosts[h][(rail + i) % ppn];
      ring.push_back(rank);
      std::vector<topology::LinkId> route;
      if (i + 1 == ppn) {
        const int entry_here = hosts[h][rail], entry_next = hosts[(h + 1) % hosts.size()][rail];
        if (rank != entry_here) route = router.path(gpu(rank), gpu(entry_here));
        const auto rail_hop = router.path(gpu(entry_here), gpu(entry_next));
        route.insert(route.end(), rail_hop.begin(), rail_hop.end());
      }
      routes.push_back(std::move(route));
    }
  }
  graph.rings.push_back(std::move(ring));
  graph.routes.push_back(std::move(routes));
}

// The channels times what each gets on its busiest link, every ring hop on its route.
double ring_bus_bw_GBps(const Topology& topology, const NcclRingGraph& graph) {
  topology::Router router(topology);
  std::vector<int> load(topology.link_count(), 0);
  for (std::size_t c = 0; c < graph.rings.size(); ++c) {
    const auto& ring = graph.rings[c];
    for (std::size_t i = 0; i < ring.size(); ++i) {
      std::vector<topology::LinkId> route = graph.routes[c][i];
      if (route.empty())
        route = router.path(topology.gpu_of_rank(ring[i]),
                            topology.gpu_of_rank(ring[(i + 1) % ring.size()]));
      for (topology::LinkId l : route) ++load[l];
    }
  }
  double per_channel = std::numeric_limits<double>::infinity();
  for (topology::LinkId l = 0; l < topology.link_count(); ++l)
    if (load[l] > 0) per_channel = std::min(per_channel, topology.link(l).bw_GBps / load[l]);
  return per_channel * static_cast<double>(graph.rings.size());
}

}  // namespace

std::vector<std::vector<int>> nccl_hosts(const Topology& topology) {
  std::map<int, std::vector<std::pair<int, int>>> hosts;  // host -> (local, rank)
  for (int rank = 0; rank < topology.rank_count(); ++rank) {
    const topology::Node& gpu = topology.node(topology.gpu_of_rank(rank));
    hosts[gpu.host].emplace_back(gpu.local, rank);
  }
  std::vector<std::vector<int>> result;
  for (auto& [host, members] : hosts) {
    std::sort(members.begin(), members.end());
    std::vector<int> ranks;
    for (const auto& [local, rank] : members) ranks.push_back(rank);
    result.push_back(std::move(ranks));
  }
  return result;
}

NcclRingGraph nccl_ring_graph(const Topology& topology) {
  if (topology.rank_count() < 2) fail(topology, "NCCL's rings need at least two ranks");
  NcclRingGraph graph;
  graph.ranks = topology.rank_count();
  graph.gpu_sm = topology.gpu_sm();
  graph.ll128 = topology::protocol_enabled(topology, topology::Protocol::ll128);
  if (graph.gpu_sm == 0)
    graph.notes.push_back("the topology does not give the GPUs' sm: NCCL's caps for sm80");
  const std::vector<std::vector<int>> hosts = nccl_hosts(topology);
  graph.nodes = static_cast<int>(hosts.size());
  const bool uniform = std::all_of(hosts.begin(), hosts.end(),
                                   [&](const auto& h) { return h.size() == hosts.front().size(); });
  if (!uniform) fail(topology, "NCCL's rings need the same number of GPUs on every host");

  const topology::RingSet direct =
      graph.nodes == 1 ? topology::link_rings(topology) : topology::RingSet{};
  if (!direct.empty()) {
    // GPUs joined by direct links (DGX-1's cube mesh, ring<N>): the rings over those links.
    for (const topology::Ring& ring : direct) graph.rings.push_back(ring.order);
    graph.notes.push_back("NCCL's search: " + std::to_string(direct.size()) +
                          " rings over direct NVLinks");
  } else if (graph.nodes == 1) {
    double slowest = std::numeric_limits<double>::infinity();
    for (int rank = 0; rank < graph.ranks; ++rank)
      slowest = std::min(slowest, gpu_out_GBps(topology, rank));
    const int rings = single_node_search_channels(graph, slowest, graph.notes);
    graph.rings.assign(static_cast<std::size_t>(rings), hosts.front());
  } else {
    // Across nodes one ring per NIC rail (NCCL's inter-node speeds are below the duplication
    // threshold on HDR and NDR NICs).
    const int rails = nics_per_host(topology, graph.nodes);
    for (int c = 0; c < rails; ++c) add_multi_node_ring(topology, hosts, c, graph);
    graph.notes.push_back("NCCL's search: one ring per NIC rail, " + std::to_string(rails) +
                          " rings");
  }
  // ncclTopoPostset doubles the search's channels for the collectives (connect.cc).
  graph.routes.resize(graph.rings.size());
  for (std::size_t c = 0; c < graph.rings.size(); ++c)
    graph.routes[c].resize(graph.rings[c].size());
  const std::size_t searched = graph.rings.size();
  for (std::size_t c = 0; c < searched && graph.rings.size() < kMaxChannels; ++c) {
    graph.rings.push_back(graph.rings[c]);
    graph.routes.push_back(graph.routes[c]);
  }
  graph.channels = static_cast<int>(graph.rings.size());
  graph.notes.push_back(std::to_string(graph.channels) + " channels (the search's rings, doubled)");
  graph.bus_bw_GBps = ring_bus_bw_GBps(topology, graph);
  const auto& first = hosts.front();
  if (first.size() > 1) {
    topology::Router router(topology);
    graph.intra = topology::hop_class(
        topology, router.path(topology.gpu_of_rank(first[0]), topology.gpu_of_rank(first[1])));
  }
  return graph;
}

}  // namespace optiflow::baselines
