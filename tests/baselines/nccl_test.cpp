// NCCL's rings and tuner as the baselines build them: channel counts from NCCL's search, rings
// that cross nodes on one rail, the tuner's formulas, and schedules that verify and simulate.
#include "optiflow/baselines/nccl.hpp"

#include <gtest/gtest.h>

#include <algorithm>
#include <cstdint>
#include <set>
#include <string>
#include <type_traits>
#include <vector>

#include "optiflow/baselines/baseline.hpp"
#include "optiflow/schedule/verifier.hpp"
#include "optiflow/support/error.hpp"
#include "optiflow/topology/generators.hpp"

namespace optiflow::baselines {
namespace {

using support::Collective;
using topology::Protocol;

constexpr std::uint64_t kGiB = std::uint64_t{1} << 30;

topology::Topology builtin(const std::string& name) {
  return *topology::make_builtin_topology(name);
}

// DGX-A100: 6 rings at 40 GB/s, duplicated to 12 at 20 (NCCL's log: "nChannels 12, bw 20"),
// doubled again for the collectives: 24 channels, the tuner's bus bandwidth 240 GB/s.
TEST(NcclRingGraph, DgxA100HasTwentyFourChannelsAt240GBps) {
  const NcclRingGraph graph = nccl_ring_graph(builtin("a100x1"));
  EXPECT_EQ(graph.channels, 24);
  EXPECT_DOUBLE_EQ(graph.bus_bw_GBps, 240.0);
  EXPECT_EQ(graph.intra, topology::HopClass::nvlink);
  for (const auto& ring : graph.rings) EXPECT_EQ(ring, (std::vector<int>{0, 1, 2, 3, 4, 5, 6, 7}));
}

TEST(NcclRingGraph, DgxH100HasTwentyFourChannels) {
  const NcclRingGraph graph = nccl_ring_graph(builtin("h100x1"));
  EXPECT_EQ(graph.channels, 24);
  EXPECT_NEAR(graph.bus_bw_GBps, 18 * 20.6, 1e-9);
  EXPECT_EQ(graph.gpu_sm, 90);
}

// Across nodes: one ring per NIC rail, doubled (16 channels); each ring visits every rank once,
// enters every node at the GPU of its rail, and reaches the next node through that GPU's NIC.
TEST(NcclRingGraph, MultiNodeRingsCrossOnOneRail) {
  const topology::Topology topo = builtin("a100x4");
  const NcclRingGraph graph = nccl_ring_graph(topo);
  EXPECT_EQ(graph.nodes, 4);
  EXPECT_EQ(graph.channels, 16);
  for (int c = 0; c < 16; ++c) {
    const auto& ring = graph.rings[static_cast<std::size_t>(c)];
    ASSERT_EQ(std::set<int>(ring.begin(), ring.end()).size(), 32u);
    const int rail = c % 8;
    for (std::size_t i = 0; i < ring.size(); ++i) {
      const auto& a = topo.node(topo.gpu_of_rank(ring[i]));
      const auto& b = topo.node(topo.gpu_of_rank(ring[(i + 1) % ring.size()]));
      const auto& route = graph.routes[static_cast<std::size_t>(c)][i];
      if (a.host == b.host) {
        EXPECT_TRUE(route.empty());
        continue;
      }
      EXPECT_EQ(b.local, rail) << "channel " << c;
      std::set<std::string> nics;
      for (topology::LinkId l : route)
        if (topo.node(topo.link(l).dst).kind == topology::NodeKind::nic)
          nics.insert(topo.node(topo.link(l).dst).id);
      EXPECT_EQ(nics.size(), 2u);
      for (const auto& nic : nics) EXPECT_TRUE(nic.ends_with("nic" + std::to_string(rail))) << nic;
    }
  }
  EXPECT_DOUBLE_EQ(graph.bus_bw_GBps, 16 * 12.5);  // two channels per 25 GB/s NIC
}

// The tuner's ring formulas (tuning.cc): latency baseLat + (n-1) * hwLat[NVLINK], bandwidth
// busBw * n/(n-1), LL at half of Simple's bus bandwidth, capped at llMaxBw (87.7 on Ampere).
TEST(NcclTuner, RingEstimatesFollowNcclsFormulas) {
  const NcclRingGraph graph = nccl_ring_graph(builtin("a100x1"));
  const auto ll = nccl_ring_estimate(graph, Collective::all_gather, Protocol::ll, 1024);
  ASSERT_TRUE(ll);
  EXPECT_NEAR(ll->latency_us, 6.6 + 7 * 0.6, 1e-9);
  EXPECT_NEAR(ll->bus_bw_GBps, 87.7, 1e-9);
  const auto simple = nccl_ring_estimate(graph, Collective::all_gather, Protocol::simple, kGiB);
  ASSERT_TRUE(simple);
  EXPECT_NEAR(simple->time_us, 8.4 + 7 * 3.4 + kGiB / (1000.0 * 240 * 8 / 7), 1e-6);
  EXPECT_EQ(nccl_tuner_pick(graph, Collective::all_gather, 1024).protocol, Protocol::ll);
  EXPECT_EQ(nccl_tuner_pick(graph, Collective::all_gather, kGiB).protocol, Protocol::simple);
}

// Across nodes every intra-node step pays at least the network overhead (1 us, 3 for Simple)
// and one step per node boundary the network latency.
TEST(NcclTuner, MultiNodeLatencyPaysTheNetworkOverhead) {
  const NcclRingGraph graph = nccl_ring_graph(builtin("a100x2"));
  const auto ll = nccl_ring_estimate(graph, Collective::all_gather, Protocol::ll, 1024);
  ASSERT_TRUE(ll);
  EXPECT_NEAR(ll->latency_us, 6.6 + 14 * 1.0 + 1 * 2.7, 1e-9);
}

TEST(NcclTuner, Ll128OnlyOnTheNvlinkGenerationsNcclTests) {
  topology::Topology topo = builtin("a100x1");
  topo.set_gpu_sm(86);
  EXPECT_FALSE(
      nccl_ring_estimate(nccl_ring_graph(topo), Collective::all_gather, Protocol::ll128, kGiB));
  topo.set_gpu_sm(80);
  EXPECT_TRUE(
      nccl_ring_estimate(nccl_ring_graph(topo), Collective::all_gather, Protocol::ll128, kGiB));
}

// The done criterion: the NCCL baselines verify and simulate on a100x4, dgx1, h100x1.
TEST(NcclBaseline, VerifiesAndSimulatesOnTheReferenceTopologies) {
  const std::vector<std::uint64_t> sizes{kGiB, 1024, 1 << 20};
  for (const char* name : {"a100x4", "dgx1", "h100x1"}) {
    SCOPED_TRACE(name);
    const topology::Topology topo = builtin(name);
    for (std::string_view baseline : baseline_names()) {
      if (baseline == "nccl-pat") continue;  // one GPU per node only
      // Its default MILP runs for minutes on a100x4; teccl_test.cpp covers it.
      if (baseline == "teccl") continue;
      if (baseline == "pat-hierarchical" && std::string(name) == "dgx1") continue;  // one node
      // The tree runs All-Reduce only.
      const Collective collective =
          baseline == "nccl-tree" ? Collective::all_reduce : Collective::all_gather;
      const BaselineRun run = run_baseline(baseline, topo, collective, sizes);
      EXPECT_TRUE(schedule::verify_schedule(run.schedule, &topo).ok());
      ASSERT_EQ(run.rows.size(), 3u);
      EXPECT_EQ(run.rows.front().size_bytes, 1024u);  // ascending
      for (const BaselineRow& row : run.rows) {
        EXPECT_GT(row.sim.time_us, 0);
        EXPECT_EQ(row.sim.protocol, row.protocol);
        EXPECT_EQ(run.schedule.protocol_for(row.size_bytes), topology::to_string(row.protocol));
      }
    }
  }
}

TEST(NcclBaseline, ReduceScatterAndAllReduceRingsVerifyAndSimulate) {
  const std::vector<std::uint64_t> sizes{1024, kGiB};
  for (const char* name : {"a100x2", "dgx1", "h100x1"}) {
    SCOPED_TRACE(name);
    const topology::Topology topo = builtin(name);
    std::vector<sim::SimResult> at_1g;
    for (Collective collective : {Collective::reduce_scatter, Collective::all_reduce}) {
      const BaselineRun run = run_baseline("nccl", topo, collective, sizes);
      const schedule::VerifyResult verdict = schedule::verify_schedule(run.schedule, &topo);
      EXPECT_TRUE(verdict.ok()) << verdict.summary();
      at_1g.push_back(run.rows.back().sim);
    }
    // All-Reduce moves twice the Reduce-Scatter's data over the same rings: every link
    // carries twice the bytes, for at least twice as long.
    const sim::SimResult &rs = at_1g[0], &ar = at_1g[1];
    ASSERT_EQ(ar.links.size(), rs.links.size());
    double busiest_us = 0;
    for (std::size_t i = 0; i < rs.links.size(); ++i) {
      EXPECT_EQ(ar.links[i].link, rs.links[i].link);
      // Sums of many transfers' bytes: equal up to rounding.
      EXPECT_NEAR(ar.links[i].bytes, 2 * rs.links[i].bytes, 1e-12 * rs.links[i].bytes)
          << "link " << rs.links[i].link;
      busiest_us = std::max(busiest_us, rs.links[i].busy_us);
    }
    // Its All-Gather half starts on each piece once that piece is reduced, overlapping the
    // Reduce-Scatter's tail: at most twice the time, and no less than the busiest link's
    // doubled work.
    EXPECT_LE(ar.time_us, 2 * rs.time_us);
    EXPECT_GE(ar.time_us, 2 * busiest_us);
  }
  const topology::Topology topo = builtin("a100x1");
  const double rs =
      run_baseline("nccl", topo, Collective::reduce_scatter, sizes).rows.back().sim.time_us;
  const double ar =
      run_baseline("nccl", topo, Collective::all_reduce, sizes).rows.back().sim.time_us;
  EXPECT_NEAR(ar / rs, 2.0, 0.02);
}

// The double binary tree: every rank but one root per channel has a parent, every node's
// head sits in the inter-node tree, and the second half of the channels uses the other tree,
// in which the first tree's leaves are interior (mirror for even node counts, shift for odd).
TEST(NcclTree, TwoTreesOverTheNodesAndAChainInEachNode) {
  for (const char* name : {"a100x2", "a100x3", "a100x4"}) {
    SCOPED_TRACE(name);
    const topology::Topology topo = builtin(name);
    const NcclRingGraph graph = nccl_ring_graph(topo);
    const std::vector<NcclTree> trees = nccl_trees(graph, topo);
    ASSERT_EQ(trees.size(), static_cast<std::size_t>(graph.channels));
    for (const NcclTree& tree : trees) {
      int roots = 0;
      for (int r = 0; r < graph.ranks; ++r) {
        const int parent = tree.parent[static_cast<std::size_t>(r)];
        if (parent < 0) {
          ++roots;
          continue;
        }
        const auto& siblings = tree.children[static_cast<std::size_t>(parent)];
        EXPECT_NE(std::find(siblings.begin(), siblings.end(), r), siblings.end());
        EXPECT_LE(siblings.size(), 3u);  // the chain's next GPU and two nodes
      }
      EXPECT_EQ(roots, 1);
    }
    // Node heads with no node children in tree 0 have some in tree 1.
    const NcclTree& first = trees.front();
    const NcclTree& second = trees[static_cast<std::size_t>(graph.channels / 2)];
    int leaves_in_both = 0;
    for (int h = 0; h < graph.nodes; ++h) {
      const int head = h * 8;  // channel 0 and channel channels/2 share rail 0
      const auto node_children = [&](const NcclTree& t) {
        int count = 0;
        for (int child : t.children[static_cast<std::size_t>(head)]) count += child / 8 != h;
        return count;
      };
      leaves_in_both += node_children(first) == 0 && node_children(second) == 0;
    }
    EXPECT_LE(leaves_in_both, graph.nodes <= 2 ? graph.nodes : 1);
  }
}

TEST(NcclTree, AllReduceVerifiesAndTheTunerFollowsNcclsFormula) {
  const topology::Topology topo = builtin("a100x4");
  const NcclRingGraph graph = nccl_ring_graph(topo);
  const schedule::Schedule s =
      nccl_tree_schedule(nccl_trees(graph, topo), graph.ranks, Collective::all_reduce, topo.name());
  const schedule::VerifyResult verdict = schedule::verify_schedule(s, &topo);
  EXPECT_TRUE(verdict.ok()) << verdict.summary();
  // baseLat[Tree][LL] + 2 * ((ppn - 1) * hwLat[NVLINK][Tree][LL] + log2(nodes) * hwLat[NET]).
  const auto ll = nccl_tree_estimate(graph, Collective::all_reduce, Protocol::ll, 1024);
  ASSERT_TRUE(ll);
  EXPECT_NEAR(ll->latency_us, 6.8 + 2 * (7 * 0.6 + 2 * 5.0), 1e-9);
  EXPECT_FALSE(nccl_tree_estimate(graph, Collective::all_gather, Protocol::ll, 1024));
  // NCCL runs the tree for small All-Reduces across nodes and the ring for large ones.
  const std::vector<std::uint64_t> sizes{1024, kGiB};
  const BaselineRun run = run_baseline("nccl", topo, Collective::all_reduce, sizes);
  EXPECT_EQ(run.rows.front().algorithm, "tree");
  EXPECT_EQ(run.rows.back().algorithm, "ring");
  EXPECT_THROW(run_baseline("nccl-tree", topo, Collective::all_gather, sizes),
               support::UnsupportedError);
}

// PAT: one GPU per node only; log2(N) rounds, round k moving 2^k chunks to the rank N/2^(k+1)
// away; NCCL's estimate 8 + log2(nodes) * 14 / 3.5 + 2.8 * N us plus the data at 0.85 busBw.
TEST(NcclPat, RunsWithOneGpuPerNodeInLog2Rounds) {
  const topology::Topology topo = builtin("fattree16");
  const NcclRingGraph graph = nccl_ring_graph(topo);
  ASSERT_TRUE(nccl_pat_runs(graph, Collective::all_gather));
  const schedule::Schedule s = nccl_pat_schedule(graph, Collective::all_gather, topo.name());
  const schedule::VerifyResult verdict = schedule::verify_schedule(s, &topo);
  EXPECT_TRUE(verdict.ok()) << verdict.summary();
  EXPECT_EQ(s.programs[0].tbs.size(), 2u * 4u);  // a send and a receive block per round
  EXPECT_EQ(s.programs[0].tbs[0].send_peer, 8);  // far peers first
  const auto pat = nccl_pat_estimate(graph, Collective::all_gather, Protocol::simple, kGiB);
  ASSERT_TRUE(pat);
  EXPECT_NEAR(pat->latency_us, 8 + 4 * 14.0 / 3.5 + 2.8 * 16, 1e-9);
  EXPECT_NEAR(pat->time_us, pat->latency_us + kGiB / (1000.0 * 0.85 * graph.bus_bw_GBps), 1e-6);
  EXPECT_FALSE(nccl_pat_estimate(graph, Collective::all_gather, Protocol::ll, kGiB));
  EXPECT_FALSE(nccl_pat_runs(nccl_ring_graph(builtin("a100x2")), Collective::all_gather));
  const std::vector<std::uint64_t> sizes{1024};
  EXPECT_THROW(run_baseline("nccl-pat", builtin("a100x2"), Collective::all_gather, sizes),
               support::UnsupportedError);
}

// The hierarchical PAT is labelled as not NCCL's, has no tuner estimate, runs Simple, and
// verifies: PAT among each rail's GPUs across the 4 nodes (2 rounds), then 7 peers inside.
TEST(NcclPat, TheHierarchicalVariantIsLabelledAndVerifies) {
  const topology::Topology topo = builtin("a100x4");
  const std::vector<std::uint64_t> sizes{1024, kGiB};
  const BaselineRun run = run_baseline("pat-hierarchical", topo, Collective::all_gather, sizes);
  ASSERT_FALSE(run.notes.empty());
  EXPECT_NE(run.notes.front().find("not an NCCL algorithm"), std::string::npos);
  for (const BaselineRow& row : run.rows) {
    EXPECT_EQ(row.algorithm, "pat-hierarchical");
    EXPECT_EQ(row.protocol, Protocol::simple);
    EXPECT_FALSE(row.model_us);
    EXPECT_GT(row.sim.time_us, 0);
  }
  EXPECT_TRUE(schedule::verify_schedule(run.schedule, &topo).ok());
  EXPECT_EQ(run.schedule.programs[0].tbs.size(), 2u * 2u + 2u * 7u);
  EXPECT_THROW(run_baseline("pat-hierarchical", builtin("a100x3"), Collective::all_gather, sizes),
               support::UnsupportedError);
}

// One node, 1 GiB, Simple: the 24 channels share each GPU's 240 GB/s, so the ring runs at
// NCCL's own estimate within a fraction of a percent.
TEST(NcclBaseline, SimulatedRingMatchesTheTunerWhereBothAreExact) {
  const topology::Topology topo = builtin("a100x1");
  const std::vector<std::uint64_t> sizes{kGiB};
  const BaselineRun run = run_baseline("nccl", topo, Collective::all_gather, sizes);
  const BaselineRow& row = run.rows.front();
  EXPECT_EQ(row.protocol, Protocol::simple);
  EXPECT_NEAR(row.sim.time_us / *row.model_us, 1.0, 0.01);
}

TEST(NcclBaseline, ErrorsNameWhatIsMissing) {
  const topology::Topology topo = builtin("a100x1");
  const std::vector<std::uint64_t> sizes{1024};
  EXPECT_THROW(run_baseline("nccl-magic", topo, Collective::all_gather, sizes),
               support::InputError);
  // What NCCL does not run is not bad input: callers asking "is there an NCCL column?" catch
  // it alone, and it names the collective, not a flag (the CLI maps it to --collective).
  static_assert(!std::is_base_of_v<support::InputError, support::UnsupportedError>);
  try {
    run_baseline("nccl", topo, Collective::broadcast, sizes);
    ADD_FAILURE() << "no UnsupportedError";
  } catch (const support::UnsupportedError& e) {
    EXPECT_EQ(e.subject(), support::UnsupportedError::Subject::collective);
    EXPECT_NE(e.message().find("broadcast"), std::string::npos) << e.message();
    EXPECT_EQ(std::string(e.what()).find("--collective"), std::string::npos) << e.what();
  }
}

// A topology NCCL's rings do not run on is unsupported too, located in the topology.
TEST(NcclBaseline, OneRankIsUnsupportedAtTheTopology) {
  topology::Topology topo("single");
  topo.add_node(topology::Node{"g0", topology::NodeKind::gpu, 0, 0, 0});
  try {
    run_baseline("nccl", topo, Collective::all_gather, std::vector<std::uint64_t>{1024});
    ADD_FAILURE() << "no UnsupportedError";
  } catch (const support::UnsupportedError& e) {
    EXPECT_EQ(e.subject(), support::UnsupportedError::Subject::topology);
    EXPECT_EQ(e.where().file, "single");
    EXPECT_EQ(std::string(e.what()).rfind("single: error: ", 0), 0u) << e.what();
  }
}

}  // namespace
}  // namespace optiflow::baselines
