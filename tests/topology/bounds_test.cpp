// The max-flow bound against brute-force enumeration and against hand-derived cuts.
#include "optiflow/topology/bounds.hpp"

#include <gtest/gtest.h>

#include <algorithm>
#include <limits>
#include <random>

#include "optiflow/support/error.hpp"
#include "optiflow/topology/generators.hpp"

namespace optiflow::topology {
namespace {

// max over node sets X with a GPU inside and a GPU outside of |GPUs in X| / out_bw(X).
double brute_force_ratio(const Topology& topo, bool reversed) {
  const std::size_t n = topo.node_count();
  double best = 0;
  for (std::uint32_t mask = 1; mask + 1 < (1u << n); ++mask) {
    auto inside = [&](NodeId v) { return (mask >> v) & 1u; };
    int gpus_in = 0, gpus_out = 0;
    for (NodeId v = 0; v < n; ++v)
      if (topo.node(v).kind == NodeKind::gpu) (inside(v) ? gpus_in : gpus_out)++;
    if (gpus_in == 0 || gpus_out == 0) continue;
    double out_bw = 0;
    for (const Link& l : topo.links()) {
      const NodeId from = reversed ? l.dst : l.src, to = reversed ? l.src : l.dst;
      if (inside(from) && !inside(to)) out_bw += l.bw_GBps;
    }
    best = std::max(best, gpus_in / out_bw);
  }
  return best;
}

// A random topology of GPUs and switches whose links form a strongly connected graph (a
// directed cycle through every node) plus random extra links, some parallel.
Topology random_topology(std::mt19937& rng) {
  std::uniform_int_distribution<int> gpu_count(2, 6), switch_count(0, 4), bw(1, 40);
  const int gpus = gpu_count(rng), switches = switch_count(rng);
  Topology topo("random");
  for (int r = 0; r < gpus; ++r)
    topo.add_node(Node{"g" + std::to_string(r), NodeKind::gpu, r, 0, r});
  for (int s = 0; s < switches; ++s)
    topo.add_node(Node{"s" + std::to_string(s), NodeKind::switch_});
  const auto n = static_cast<NodeId>(topo.node_count());
  std::vector<NodeId> order(n);
  for (NodeId v = 0; v < n; ++v) order[v] = v;
  std::shuffle(order.begin(), order.end(), rng);
  for (NodeId i = 0; i < n; ++i)
    topo.add_link(order[i], order[(i + 1) % n], LinkSpec{LinkKind::other, double(bw(rng)), 1.0});
  std::uniform_int_distribution<NodeId> pick(0, n - 1);
  const int extra = std::uniform_int_distribution<int>(0, 3 * static_cast<int>(n))(rng);
  for (int e = 0; e < extra; ++e) {
    const NodeId a = pick(rng), b = pick(rng);
    if (a != b) topo.add_link(a, b, LinkSpec{LinkKind::other, double(bw(rng)), 0.5});
  }
  topo.validate();
  return topo;
}

TEST(BottleneckCut, MatchesBruteForceOnRandomTopologiesWithSwitches) {
  std::mt19937 rng(20261130);
  for (int trial = 0; trial < 300; ++trial) {
    const Topology topo = random_topology(rng);
    for (bool reversed : {false, true}) {
      const BottleneckCut cut = bottleneck_cut(topo, reversed);
      const double expected = brute_force_ratio(topo, reversed);
      EXPECT_NEAR(cut.gpus_inside / cut.out_bw_GBps, expected, 1e-9 * expected)
          << "trial " << trial << (reversed ? " (reversed)" : "");
    }
  }
}

TEST(BottleneckCut, ReportsTheSetItMeasured) {
  std::mt19937 rng(7);
  for (int trial = 0; trial < 50; ++trial) {
    const Topology topo = random_topology(rng);
    const BottleneckCut cut = bottleneck_cut(topo, false);
    double out_bw = 0;
    std::vector<bool> inside(topo.node_count(), false);
    for (NodeId v : cut.inside) inside[v] = true;
    for (const Link& l : topo.links())
      if (inside[l.src] && !inside[l.dst]) out_bw += l.bw_GBps;
    EXPECT_DOUBLE_EQ(out_bw, cut.out_bw_GBps);
    EXPECT_LT(cut.gpus_inside, topo.rank_count());
  }
}

constexpr std::uint64_t kGiB = std::uint64_t{1} << 30;

TEST(LowerBound, BidirectionalRingIsLimitedByOneGpusIngress) {
  const Topology ring = make_ring(8);  // 25 GB/s per link and direction
  const auto at = LowerBound::compute(ring, support::Collective::all_gather).at(kGiB);
  EXPECT_NEAR(at.bandwidth_us, (kGiB / 8.0) * 7 / (50 * 1e3), 1e-6);
}

TEST(LowerBound, FullMeshNeedsOneShareOverOneLink) {
  const auto at = LowerBound::compute(make_fullmesh(6), support::Collective::all_gather).at(kGiB);
  EXPECT_NEAR(at.bandwidth_us, (kGiB / 6.0) / (25 * 1e3), 1e-6);
}

TEST(LowerBound, A100ClusterIsLimitedByTheNicsOfOneNode) {
  // Everything the other 3 nodes hold (24 shares) must enter a node through its 8 HDR NICs.
  const auto bound = LowerBound::compute(make_a100(4), support::Collective::all_gather);
  EXPECT_EQ(bound.phases().front().cut.gpus_inside, 24);
  EXPECT_DOUBLE_EQ(bound.phases().front().cut.out_bw_GBps, 200);
  EXPECT_NEAR(bound.at(kGiB).bandwidth_us, (kGiB / 32.0) * 24 / (200 * 1e3), 1e-6);
}

TEST(LowerBound, DegradedNicRaisesTheBound) {
  const auto healthy = LowerBound::compute(make_a100(4), support::Collective::all_gather).at(kGiB);
  const auto degraded =
      LowerBound::compute(make_a100x4_degraded(), support::Collective::all_gather);
  EXPECT_DOUBLE_EQ(degraded.phases().front().cut.out_bw_GBps, 7 * 25 + 6.25);
  EXPECT_NEAR(degraded.at(kGiB).bandwidth_us / healthy.bandwidth_us, 200 / 181.25, 1e-9);
}

TEST(LowerBound, Dgx1IsLimitedByOneGpusSixNvlinks) {
  const auto bound = LowerBound::compute(make_dgx1(), support::Collective::all_gather);
  EXPECT_EQ(bound.phases().front().cut.gpus_inside, 7);
  EXPECT_DOUBLE_EQ(bound.phases().front().cut.out_bw_GBps, 6 * 20.0);  // NCCL's SM70 NVLink
}

// All-Reduce moves the data of both phases over their cuts, but a pipelined one overlaps their
// latencies: one launch cost and one cut latency (Simple's network step, 14 us, at 1 GiB).
TEST(LowerBound, AllReduceIsReduceScatterPlusAllGather) {
  const Topology topo = make_a100x4_degraded();
  const auto ag = LowerBound::compute(topo, support::Collective::all_gather).at(kGiB);
  const auto rs = LowerBound::compute(topo, support::Collective::reduce_scatter).at(kGiB);
  const auto ar = LowerBound::compute(topo, support::Collective::all_reduce).at(kGiB);
  const ProtocolCosts& simple = protocol_costs(Protocol::simple);
  const double once_us = simple.launch_us + simple.step_latency(HopClass::net);
  EXPECT_NEAR(ar.time_us, ag.time_us + rs.time_us - once_us, 1e-9 * ar.time_us);
  EXPECT_NEAR(ar.busbw_GBps, ar.algbw_GBps * 2 * 31 / 32, 1e-9);
}

TEST(LowerBound, ReduceScatterUsesTheReversedLinks) {
  // A directed triangle with one fast and two slow links: reversing it moves the bottleneck.
  Topology topo("skewed");
  for (int r = 0; r < 3; ++r) topo.add_node(Node{"g" + std::to_string(r), NodeKind::gpu, r, 0, r});
  topo.add_link(0, 1, LinkSpec{LinkKind::other, 100, 1});
  topo.add_link(1, 2, LinkSpec{LinkKind::other, 10, 1});
  topo.add_link(2, 0, LinkSpec{LinkKind::other, 10, 1});
  topo.add_link(0, 2, LinkSpec{LinkKind::other, 10, 1});
  EXPECT_NEAR(bottleneck_cut(topo, false).gpus_inside / bottleneck_cut(topo, false).out_bw_GBps,
              brute_force_ratio(topo, false), 1e-12);
  EXPECT_NEAR(bottleneck_cut(topo, true).gpus_inside / bottleneck_cut(topo, true).out_bw_GBps,
              brute_force_ratio(topo, true), 1e-12);
}

TEST(LowerBound, LatencyBoundIsTheWorstLowestLatencyPath) {
  EXPECT_DOUBLE_EQ(latency_bound_us(make_ring(8)), 4.0);  // 4 hops of 1 us
  // a100x4: only the leaf-spine hop has an alpha (the protocol's step latency stands for the
  // rest), and across nodes and rails an NVSwitch detour to the right rail avoids the spine.
  EXPECT_DOUBLE_EQ(latency_bound_us(make_a100(4)), 0.0);
}

// With no data, the bound is the cheapest protocol's launch cost, the worst pair's alphas and
// one step latency: on ring8, LL's 6.6 + 4 * 1 + 0.6 us.
TEST(LowerBound, SmallSizesAreLatencyBoundUnderTheCheapestProtocol) {
  const auto bound = LowerBound::compute(make_ring(8), support::Collective::all_gather);
  const ProtocolCosts& ll = protocol_costs(Protocol::ll);
  EXPECT_DOUBLE_EQ(bound.at(8).time_us, ll.launch_us + 4.0 + ll.step_latency(HopClass::nvlink));
  EXPECT_EQ(bound.at(8).protocol, Protocol::ll);
  EXPECT_GT(bound.at(kGiB).time_us, bound.at(kGiB).bandwidth_us);
}

// At large sizes, Simple's full data share wins: launch + alpha + step + S/N * 7 / out_bw.
TEST(LowerBound, LargeSizesAreBandwidthBoundUnderSimple) {
  const auto bound = LowerBound::compute(make_ring(8), support::Collective::all_gather);
  const ProtocolCosts& simple = protocol_costs(Protocol::simple);
  const auto at = bound.at(kGiB);
  EXPECT_EQ(at.protocol, Protocol::simple);
  EXPECT_NEAR(at.time_us,
              simple.launch_us + 1.0 + simple.step_latency(HopClass::nvlink) + at.bandwidth_us,
              1e-9 * at.time_us);
}

// Data that must cross the network pays the network's step latency: on a100x4 every pair of
// hosts is joined only through InfiniBand, and the bottleneck cut is a host's NICs.
TEST(LowerBound, DataThatMustCrossTheNetworkPaysItsStepLatency) {
  const auto bound = LowerBound::compute(make_a100(4), support::Collective::all_gather);
  const ProtocolCosts& ll = protocol_costs(Protocol::ll);
  EXPECT_NEAR(bound.at(8).time_us, ll.launch_us + ll.step_latency(HopClass::net), 1e-3);
  const ProtocolCosts& simple = protocol_costs(Protocol::simple);
  const auto at = bound.at(kGiB);
  EXPECT_NEAR(at.time_us, simple.launch_us + simple.step_latency(HopClass::net) + at.bandwidth_us,
              1e-9 * at.time_us);
  // One host alone needs no network: NVLink's step latency.
  const auto one_host = LowerBound::compute(make_a100(1), support::Collective::all_gather);
  EXPECT_NEAR(one_host.at(8).time_us, ll.launch_us + ll.step_latency(HopClass::nvlink), 1e-3);
}

// A pair's least latency over each class of path: the ring's 4 hops of NVLink for the
// farthest pair; on a100x2 two GPUs of different hosts have no path without InfiniBand.
TEST(LowerBound, PairLatenciesAreByTheHighestClassAPathCrosses) {
  const auto ring = pair_class_alphas(make_ring(8));
  EXPECT_EQ(ring.back(), (ClassAlphas{4, 4, 4}));
  const auto a100 = pair_class_alphas(make_a100(2));
  const double inf = std::numeric_limits<double>::infinity();
  EXPECT_NE(std::find(a100.begin(), a100.end(), ClassAlphas{inf, inf, 0}), a100.end());
  EXPECT_NE(std::find(a100.begin(), a100.end(), ClassAlphas{0, 0, 0}), a100.end());
}

TEST(LowerBound, DisconnectedGpusAreAnError) {
  Topology topo("split");
  for (int r = 0; r < 4; ++r) topo.add_node(Node{"g" + std::to_string(r), NodeKind::gpu, r, 0, r});
  topo.add_duplex(0, 1, LinkSpec{LinkKind::other, 10, 1});
  topo.add_duplex(2, 3, LinkSpec{LinkKind::other, 10, 1});
  EXPECT_THROW(LowerBound::compute(topo, support::Collective::all_gather),
               support::UnsupportedError);
}

TEST(LowerBound, OtherCollectivesAreRejectedClearly) {
  try {
    LowerBound::compute(make_ring(4), support::Collective::all_to_all);
    FAIL() << "expected an error";
  } catch (const support::UnsupportedError& e) {
    EXPECT_NE(std::string(e.what()).find("alltoall"), std::string::npos);
  }
}

}  // namespace
}  // namespace optiflow::topology
