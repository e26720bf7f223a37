// NCCL's tuner model for rings (src/graph/tuning.cc, v2.23.4-1): time = latency + nBytes /
// (1000 * algorithm bandwidth), per protocol; the tuner runs the cheapest (enqueue.cc,
// topoGetAlgoInfo). The latency and per-step figures are the cost model's protocol table
// (core/topology/src/protocol.cpp); what only the tuner uses is here.
#include <algorithm>
#include <array>
#include <limits>

#include "optiflow/baselines/nccl.hpp"

namespace optiflow::baselines {
namespace {

using topology::HopClass;
using topology::Protocol;

// tuning.cc l.86-96, by GPU generation (Volta, Ampere, Hopper) and nodes (1, 2, more).
// llMaxBws caps a ring's LL bus bandwidth; its multi-node rows follow the CPU vendor, Intel
// assumed (row 0).
constexpr double kLlMaxBws[3][3] = {{39.0, 39.0, 20.4}, {87.7, 22.5, 19.0}, {141.0, 45.0, 35.0}};
// perChMaxRingLL128Bws: LL128 per search channel.
constexpr double kPerChMaxRingLL128Bws[3][3] = {
    {20.0, 20.0, 20.0}, {20.0, 20.0, 20.0}, {36.7, 36.7, 36.7}};
constexpr double kLlShare = 0.5;
constexpr double kLl128Share = 0.92;

// The tree's rows (tuning.cc v2.23.4-1 l.57-78, l.95-106): baseLat[Tree], hwLat[*][Tree],
// perChMaxTreeBws, perChMaxTreeLL128Bws, and treeCorrectionFactor (l.433) by log2(bytes / 64).
constexpr std::array<double, 3> kTreeBaseLatencyUs{6.8, 14.0, 8.4};
constexpr double kTreeHopLatencyUs[3][3] = {  // [NVLINK, PCI, NET][LL, LL128, Simple]
    {0.6, 1.25, 4.0},
    {1.0, 1.9, 4.0},
    {5.0, 8.5, 14.0}};
constexpr double kPerChMaxTreeBws[3][3] = {
    {26.5, 18.5, 10.0}, {24.0, 23.6, 17.8}, {38.7, 41.4, 36.0}};
constexpr double kPerChMaxTreeLL128Bws[3][3] = {
    {20.0, 20.0, 20.0}, {20.0, 20.0, 20.0}, {36.7, 36.7, 29.0}};
constexpr double kTreeCorrection[3][23] = {
    {1.0, 1.0, 1.0, 1.0, .9, .8, .7, .7,  .7,  .7,  .6, .5,
     .4,  .4,  .5,  .6,  .7, .8, .9, 1.0, 1.0, 1.0, 1.0},
    {1.0, 1.0, 1.0, 1.0, 1.0, .9, .8, .8, .8, .7,  .6, .6,
     .6,  .6,  .6,  .6,  .8,  .9, .9, .9, .9, 1.0, 1.0},
    {.9, .9, .9, .9, .9, .9, .9, .8, .7, .6, .6, .5, .5, .5, .5, .6, .7, .8, .7, .7, .8, .9, .9}};

int floor_log2(std::uint64_t x) {
  int log = -1;
  for (; x > 0; x >>= 1) ++log;
  return log;
}

int generation_index(int sm) {
  const int effective = sm == 0 ? 80 : sm;
  return effective >= 90 ? 2 : effective >= 80 ? 1 : 0;
}

}  // namespace

std::string_view to_string(NcclAlgorithm algorithm) {
  constexpr std::array<std::string_view, 4> names{"ring", "tree", "pat", "pat-hierarchical"};
  return names[static_cast<std::size_t>(algorithm)];
}

std::optional<NcclEstimate> nccl_ring_estimate(const NcclRingGraph& graph,
                                               support::Collective collective, Protocol protocol,
                                               std::uint64_t bytes) {
  if (protocol == Protocol::ll128 && !graph.ll128) return std::nullopt;
  const int n = graph.ranks, nodes = graph.nodes;
  const bool all_reduce = collective == support::Collective::all_reduce;
  const int steps = all_reduce ? 2 * (n - 1) : n - 1;
  const int inter_steps = nodes == 1 ? 0 : all_reduce ? 2 * (nodes - 1) : nodes - 1;
  const int generation = generation_index(graph.gpu_sm);
  const int by_nodes = nodes <= 2 ? nodes - 1 : 2;
  const auto p = static_cast<std::size_t>(protocol);

  double bus_bw = graph.bus_bw_GBps;
  if (protocol == Protocol::ll)
    bus_bw = std::min(kLlMaxBws[nodes == 1 ? generation : 0][by_nodes], bus_bw * kLlShare);
  if (protocol == Protocol::ll128)
    bus_bw = std::min(bus_bw * kLl128Share,
                      graph.channels / 2.0 * kPerChMaxRingLL128Bws[generation][by_nodes]);

  const topology::ProtocolCosts& costs = topology::protocol_costs(protocol);
  double intra_us = costs.step_latency(graph.intra);
  // With one GPU per node the network latency is the tree's (tuning.cc l.236).
  const double inter_us = n == nodes ? kTreeHopLatencyUs[2][p] : costs.step_latency(HopClass::net);
  if (nodes > 1) intra_us = std::max(intra_us, topology::network_step_overhead_us(protocol));
  NcclEstimate estimate;
  estimate.protocol = protocol;
  estimate.latency_us = costs.launch_us + (steps - inter_steps) * intra_us + inter_steps * inter_us;
  // ncclTopoGetAlgoTime (tuning.cc l.459-462): the "plateau effect of ring" for multi-node
  // All-Reduce.
  const bool plateau = all_reduce && nodes > 1 && protocol == Protocol::simple &&
                       bytes / (static_cast<std::uint64_t>(graph.channels) * n) >= 64;
  if (plateau) estimate.latency_us *= graph.gpu_sm != 0 && graph.gpu_sm < 80 ? 1.9 : 1.4;
  estimate.bus_bw_GBps = bus_bw;
  const double alg_bw = bus_bw * n / steps;
  estimate.time_us = estimate.latency_us + static_cast<double>(bytes) / (1000.0 * alg_bw);
  return estimate;
}

std::optional<NcclEstimate> nccl_tree_estimate(const NcclRingGraph& graph,
                                               support::Collective collective, Protocol protocol,
                                               std::uint64_t bytes) {
  if (collective != support::Collective::all_reduce) return std::nullopt;
  if (protocol == Protocol::ll128 && !graph.ll128) return std::nullopt;
  const int nodes = graph.nodes, ppn = graph.ranks / graph.nodes;
  const int generation = generation_index(graph.gpu_sm);
  const int by_nodes = nodes <= 2 ? nodes - 1 : 2;
  const double search_channels = graph.channels / 2.0;
  const auto p = static_cast<std::size_t>(protocol);
  double bus_bw =
      std::min(graph.bus_bw_GBps * 0.92, search_channels * kPerChMaxTreeBws[generation][by_nodes]);
  if (protocol == Protocol::ll)
    bus_bw = std::min(bus_bw / 3.8, kLlMaxBws[nodes == 1 ? generation : 0][by_nodes]);
  if (protocol == Protocol::ll128)
    bus_bw = std::min(bus_bw * (nodes == 1 ? 7.0 / 9.0 : 120.0 / 128.0),
                      search_channels * kPerChMaxTreeLL128Bws[generation][by_nodes]);
  const double intra_us = kTreeHopLatencyUs[graph.intra == HopClass::pci ? 1 : 0][p];
  const double inter_us = kTreeHopLatencyUs[2][p];
  NcclEstimate estimate;
  estimate.algorithm = NcclAlgorithm::tree;
  estimate.protocol = protocol;
  estimate.latency_us =
      kTreeBaseLatencyUs[p] + 2 * ((ppn - 1) * intra_us + floor_log2(nodes) * inter_us);
  estimate.bus_bw_GBps = bus_bw;
  double alg_bw = bus_bw * 0.5;
  const int log_size = floor_log2(bytes >> 6);
  if (log_size >= 0 && log_size < 23) alg_bw *= kTreeCorrection[p][log_size];
  estimate.time_us = estimate.latency_us + static_cast<double>(bytes) / (1000.0 * alg_bw);
  return estimate;
}

std::optional<NcclEstimate> nccl_pat_estimate(const NcclRingGraph& graph,
                                              support::Collective collective, Protocol protocol,
                                              std::uint64_t bytes) {
  if (protocol != Protocol::simple || !nccl_pat_runs(graph, collective)) return std::nullopt;
  // tuning.cc l.193, l.221 and l.276-279: busBw * 0.85 with no algorithm-bandwidth ratio, and
  // 8 + log2(nodes) * interLat / 3.5 + 2.8 * ranks, interLat = hwLat[NET][Tree][Simple].
  NcclEstimate estimate;
  estimate.algorithm = NcclAlgorithm::pat;
  estimate.protocol = protocol;
  estimate.bus_bw_GBps = graph.bus_bw_GBps * 0.85;
  estimate.latency_us =
      8 + floor_log2(graph.nodes) * kTreeHopLatencyUs[2][2] / 3.5 + 2.8 * graph.ranks;
  estimate.time_us =
      estimate.latency_us + static_cast<double>(bytes) / (1000.0 * estimate.bus_bw_GBps);
  return estimate;
}

NcclEstimate nccl_tuner_pick(const NcclRingGraph& graph, support::Collective collective,
                             std::uint64_t bytes) {
  NcclEstimate best;
  best.time_us = std::numeric_limits<double>::infinity();
  for (Protocol protocol : topology::kProtocols)
    for (auto estimate : {nccl_ring_estimate(graph, collective, protocol, bytes),
                          nccl_tree_estimate(graph, collective, protocol, bytes),
                          nccl_pat_estimate(graph, collective, protocol, bytes)})
      if (estimate && estimate->time_us < best.time_us) best = *estimate;
  return best;
}

}  // namespace optiflow::baselines
