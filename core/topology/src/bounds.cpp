#include "optiflow/topology/bounds.hpp"

#include <algorithm>
#include <boost/graph/dijkstra_shortest_paths.hpp>
#include <boost/graph/push_relabel_max_flow.hpp>
#include <boost/property_map/function_property_map.hpp>
#include <cmath>
#include <limits>
#include <queue>

#include "optiflow/support/error.hpp"
#include "optiflow/support/units.hpp"

namespace optiflow::topology {
namespace {

// Capacities are integers (bytes/s) so that "the max-flow reaches x * N" is an exact test;
// floating-point push-relabel can stall on residuals of 1e-12.
using Capacity = std::int64_t;
constexpr double kBytesPerSecondPerGBps = 1e9;

Capacity to_capacity(double bw_GBps) {
  return static_cast<Capacity>(std::llround(bw_GBps * kBytesPerSecondPerGBps));
}

using FlowTraits = boost::adjacency_list_traits<boost::vecS, boost::vecS, boost::directedS>;
using FlowGraph = boost::adjacency_list<
    boost::vecS, boost::vecS, boost::directedS, boost::no_property,
    boost::property<
        boost::edge_capacity_t, Capacity,
        boost::property<boost::edge_residual_capacity_t, Capacity,
                        boost::property<boost::edge_reverse_t, FlowTraits::edge_descriptor>>>>;
using FlowEdge = FlowTraits::edge_descriptor;

// The topology as a flow network, plus a source vertex feeding every GPU at a settable rate.
class FlowNetwork {
 public:
  FlowNetwork(const Topology& topology, bool reversed)
      : graph_(topology.node_count() + 1), source_(topology.node_count()) {
    for (const Link& link : topology.links()) {
      const NodeId from = reversed ? link.dst : link.src;
      const NodeId to = reversed ? link.src : link.dst;
      add_edge(from, to, to_capacity(link.bw_GBps));
    }
    for (NodeId gpu : topology.gpus_by_rank()) source_edges_.push_back(add_edge(source_, gpu, 0));
  }

  /// Max-flow from the source (feeding each GPU at `rate`) to `sink`.
  Capacity max_flow(NodeId sink, Capacity rate) {
    auto capacity = boost::get(boost::edge_capacity, graph_);
    for (const FlowEdge& e : source_edges_) capacity[e] = rate;
    return boost::push_relabel_max_flow(graph_, source_, sink);
  }

  /// After max_flow: the nodes still reachable from the source through residual capacity,
  /// i.e. the source side of a minimum cut (without the source itself).
  std::vector<bool> source_side() const {
    auto residual = boost::get(boost::edge_residual_capacity, graph_);
    std::vector<bool> reached(boost::num_vertices(graph_), false);
    std::queue<std::size_t> frontier;
    reached[source_] = true;
    frontier.push(source_);
    while (!frontier.empty()) {
      const std::size_t v = frontier.front();
      frontier.pop();
      for (auto [it, end] = boost::out_edges(v, graph_); it != end; ++it) {
        const std::size_t w = boost::target(*it, graph_);
        if (!reached[w] && residual[*it] > 0) {
          reached[w] = true;
          frontier.push(w);
        }
      }
    }
    reached.pop_back();  // the source is the last vertex
    return reached;
  }

 private:
  FlowEdge add_edge(std::size_t from, std::size_t to, Capacity cap) {
    auto capacity = boost::get(boost::edge_capacity, graph_);
    auto reverse = boost::get(boost::edge_reverse, graph_);
    const FlowEdge forward = boost::add_edge(from, to, graph_).first;
    const FlowEdge backward = boost::add_edge(to, from, graph_).first;
    capacity[forward] = cap;
    capacity[backward] = 0;
    reverse[forward] = backward;
    reverse[backward] = forward;
    return forward;
  }

  FlowGraph graph_;
  std::size_t source_;
  std::vector<FlowEdge> source_edges_;
};

constexpr double kInfinity = std::numeric_limits<double>::infinity();

std::size_t class_of(const Topology& topology, LinkId link) {
  return static_cast<std::size_t>(hop_class(topology, std::span<const LinkId>(&link, 1)));
}

// The figures of a cut, measured on the topology itself (in the chosen direction).
BottleneckCut describe_cut(const Topology& topology, const std::vector<bool>& inside,
                           bool reversed) {
  BottleneckCut cut;
  cut.min_alpha_us = kInfinity;
  cut.min_alpha_by_class.fill(kInfinity);
  for (NodeId n = 0; n < topology.node_count(); ++n) {
    if (!inside[n]) continue;
    cut.inside.push_back(n);
    if (topology.node(n).kind == NodeKind::gpu) ++cut.gpus_inside;
  }
  for (LinkId id = 0; id < topology.link_count(); ++id) {
    const Link& link = topology.link(id);
    const NodeId from = reversed ? link.dst : link.src;
    const NodeId to = reversed ? link.src : link.dst;
    if (!inside[from] || inside[to]) continue;
    const std::size_t k = class_of(topology, id);
    cut.out_bw_GBps += link.bw_GBps;
    cut.out_bw_by_class[k] += link.bw_GBps;
    cut.min_alpha_us = std::min(cut.min_alpha_us, link.alpha_us);
    cut.min_alpha_by_class[k] = std::min(cut.min_alpha_by_class[k], link.alpha_us);
  }
  if (cut.out_bw_GBps == 0) cut.min_alpha_us = 0;
  return cut;
}

Capacity cut_capacity(const Topology& topology, const std::vector<bool>& inside, bool reversed) {
  Capacity total = 0;
  for (const Link& link : topology.links()) {
    const NodeId from = reversed ? link.dst : link.src;
    const NodeId to = reversed ? link.src : link.dst;
    if (inside[from] && !inside[to]) total += to_capacity(link.bw_GBps);
  }
  return total;
}

[[noreturn]] void fail_disconnected(const Topology& topology, const BottleneckCut& cut) {
  std::string members;
  for (NodeId n : cut.inside) {
    if (topology.node(n).kind != NodeKind::gpu) continue;
    if (members.size() > 60) {
      members += ", ...";
      break;
    }
    members += (members.empty() ? "" : ", ") + topology.node(n).id;
  }
  throw support::UnsupportedError(
      support::UnsupportedError::Subject::topology,
      "no link leads from {" + members + "} to the other GPUs, so no collective can complete",
      support::SourceLocation{topology.name(), 0, 0, "links"});
}

// Least total alpha from `from` to every node over the links that `allowed` admits.
class AlphaDistances {
 public:
  explicit AlphaDistances(const Topology& topology)
      : topology_(topology), distance_(topology.node_count()) {}

  template <typename Allowed>
  const std::vector<double>& from(NodeId source, Allowed&& allowed) {
    const auto& graph = topology_.graph();
    auto weight = boost::make_function_property_map<Topology::Graph::edge_descriptor>(
        [&](const Topology::Graph::edge_descriptor& e) {
          const LinkId link = graph[e].link;
          return allowed(link) ? topology_.link(link).alpha_us : kInfinity;
        });
    boost::dijkstra_shortest_paths(
        graph, source,
        boost::weight_map(weight)
            .distance_map(boost::make_iterator_property_map(distance_.begin(),
                                                            boost::get(boost::vertex_index, graph)))
            .distance_inf(kInfinity));
    return distance_;
  }

 private:
  const Topology& topology_;
  std::vector<double> distance_;
};

// The cheapest step latency of a transfer whose worst link is of class k: one of class k or
// higher. (The table's latencies rise with the class, but a protocol row need not.)
std::array<double, kHopClasses> step_latency_from_class(const ProtocolCosts& protocol) {
  std::array<double, kHopClasses> least{};
  double running = kInfinity;
  for (std::size_t k = kHopClasses; k-- > 0;)
    least[k] = running = std::min(running, protocol.step_latency_us[k]);
  return least;
}

std::array<double, kHopClasses> share_from_class(const ProtocolCosts& protocol) {
  std::array<double, kHopClasses> best{};
  double running = 0;
  for (std::size_t k = kHopClasses; k-- > 0;)
    best[k] = running = std::max(running, protocol.data_share[k]);
  return best;
}

}  // namespace

BottleneckCut bottleneck_cut(const Topology& topology, bool reversed) {
  const auto gpus = topology.gpus_by_rank();
  const auto n = static_cast<Capacity>(gpus.size());
  if (n < 2) return BottleneckCut{};

  // Start from the tightest single-GPU cut, X = everything but one GPU: a valid set, so the
  // optimum rate x* is at most its ratio. Dinkelbach steps only ever lower x.
  std::vector<bool> inside(topology.node_count(), true);
  std::vector<bool> best_set;
  Capacity rate = std::numeric_limits<Capacity>::max();
  for (NodeId gpu : gpus) {
    inside[gpu] = false;
    const Capacity ratio = cut_capacity(topology, inside, reversed) / (n - 1);
    if (ratio < rate) {
      rate = ratio;
      best_set = inside;
    }
    inside[gpu] = true;
  }

  // A rate that is feasible for sink t stays feasible when lowered, so one pass over the sinks
  // suffices: each sink is re-solved only until it stops finding a violating set.
  FlowNetwork network(topology, reversed);
  for (NodeId sink : gpus) {
    while (rate > 0 && network.max_flow(sink, rate) < rate * n) {
      std::vector<bool> violating = network.source_side();
      Capacity gpus_inside = 0;
      for (NodeId gpu : gpus) gpus_inside += violating[gpu] ? 1 : 0;
      rate = cut_capacity(topology, violating, reversed) / gpus_inside;
      best_set = std::move(violating);
    }
  }
  BottleneckCut cut = describe_cut(topology, best_set, reversed);
  if (cut.out_bw_GBps == 0) fail_disconnected(topology, cut);
  return cut;
}

double latency_bound_us(const Topology& topology) {
  AlphaDistances distances(topology);
  double worst = 0;
  for (NodeId from : topology.gpus_by_rank()) {
    const auto& distance = distances.from(from, [](LinkId) { return true; });
    for (NodeId to : topology.gpus_by_rank()) worst = std::max(worst, distance[to]);
  }
  return worst;
}

std::vector<ClassAlphas> pair_class_alphas(const Topology& topology) {
  std::vector<std::size_t> link_class(topology.link_count());
  for (LinkId id = 0; id < topology.link_count(); ++id) link_class[id] = class_of(topology, id);
  AlphaDistances distances(topology);
  const auto gpus = topology.gpus_by_rank();
  std::vector<ClassAlphas> pairs;
  std::vector<ClassAlphas> from_u(gpus.size());
  for (NodeId u : gpus) {
    for (std::size_t k = 0; k < kHopClasses; ++k) {
      const auto& distance = distances.from(u, [&](LinkId l) { return link_class[l] <= k; });
      for (std::size_t v = 0; v < gpus.size(); ++v) from_u[v][k] = distance[gpus[v]];
    }
    for (std::size_t v = 0; v < gpus.size(); ++v)
      if (gpus[v] != u) pairs.push_back(from_u[v]);
    std::sort(pairs.begin(), pairs.end());
    pairs.erase(std::unique(pairs.begin(), pairs.end()), pairs.end());
  }
  return pairs;
}

double PhaseBound::bandwidth_us(std::uint64_t size_bytes) const {
  if (ranks < 2 || cut.out_bw_GBps <= 0) return 0;
  const double bytes_out = static_cast<double>(size_bytes) / ranks * cut.gpus_inside;
  return support::transfer_us(bytes_out, cut.out_bw_GBps);
}

double PhaseBound::path_latency_us(const ProtocolCosts& protocol) const {
  if (ranks < 2) return 0;
  const auto step = step_latency_from_class(protocol);
  double worst = 0;
  for (const ClassAlphas& alphas : pair_alphas) {
    double least = kInfinity;
    for (std::size_t k = 0; k < kHopClasses; ++k) least = std::min(least, alphas[k] + step[k]);
    worst = std::max(worst, least);
  }
  return worst;
}

double PhaseBound::cut_latency_us(const ProtocolCosts& protocol) const {
  const auto step = step_latency_from_class(protocol);
  double least = kInfinity;
  for (std::size_t k = 0; k < kHopClasses; ++k)
    if (cut.out_bw_by_class[k] > 0) least = std::min(least, cut.min_alpha_by_class[k] + step[k]);
  return least;
}

double PhaseBound::cut_data_us(std::uint64_t size_bytes, const ProtocolCosts& protocol) const {
  if (ranks < 2) return 0;
  const auto share = share_from_class(protocol);
  double data_rate_GBps = 0;
  for (std::size_t k = 0; k < kHopClasses; ++k) data_rate_GBps += cut.out_bw_by_class[k] * share[k];
  const double bytes_out = static_cast<double>(size_bytes) / ranks * cut.gpus_inside;
  return support::transfer_us(bytes_out, data_rate_GBps);
}

LowerBound LowerBound::compute(const Topology& topology, support::Collective collective) {
  LowerBound bound;
  bound.collective_ = collective;
  bound.ranks_ = topology.rank_count();
  for (Protocol protocol : kProtocols)
    bound.costs_[static_cast<std::size_t>(protocol)] = protocol_costs(topology, protocol);
  const double latency = latency_bound_us(topology);
  // Reversing every link maps the ordered pairs onto each other: the same distinct set.
  const std::vector<ClassAlphas> pairs = pair_class_alphas(topology);
  auto phase = [&](bool reversed) {
    return PhaseBound{bottleneck_cut(topology, reversed), bound.ranks_, latency, pairs};
  };
  switch (collective) {
    case support::Collective::all_gather:
      bound.phases_ = {phase(false)};
      break;
    case support::Collective::reduce_scatter:
      bound.phases_ = {phase(true)};
      break;
    case support::Collective::all_reduce:
      bound.phases_ = {phase(true), phase(false)};
      break;
    default:
      throw support::UnsupportedError(
          support::UnsupportedError::Subject::collective,
          "lower bounds exist for allgather, reducescatter and allreduce; not for " +
              std::string(to_string(collective)));
  }
  return bound;
}

BoundAtSize LowerBound::at(std::uint64_t size_bytes) const {
  BoundAtSize result;
  result.size_bytes = size_bytes;
  if (ranks_ < 2) return result;
  result.time_us = std::numeric_limits<double>::infinity();
  for (Protocol protocol : kProtocols) {
    const ProtocolCosts& costs = costs_[static_cast<std::size_t>(protocol)];
    double path_us = 0, cut_latency_us = kInfinity, data_us = 0;
    for (const PhaseBound& p : phases_) {
      path_us = std::max(path_us, p.path_latency_us(costs));
      cut_latency_us = std::min(cut_latency_us, p.cut_latency_us(costs));
      data_us += p.cut_data_us(size_bytes, costs);
    }
    const double time_us = costs.launch_us + std::max(path_us, cut_latency_us + data_us);
    if (time_us >= result.time_us) continue;
    result.time_us = time_us;
    result.protocol = protocol;
    result.latency_us = costs.launch_us + std::max(path_us, cut_latency_us);
  }
  for (const PhaseBound& p : phases_) result.bandwidth_us += p.bandwidth_us(size_bytes);
  if (result.time_us > 0) {
    result.algbw_GBps = support::GBps_of(static_cast<double>(size_bytes), result.time_us);
    result.busbw_GBps = result.algbw_GBps * support::busbw_factor(collective_, ranks_);
  }
  return result;
}

}  // namespace optiflow::topology
