// The TACCL baseline: TACCL's topology and sketch files read as TACCL reads them, their errors,
// the sketch's rules holding in the synthesized schedule, and schedules that verify and simulate
// (run_baseline verifies before it simulates).
#include "optiflow/baselines/taccl.hpp"

#include <gtest/gtest.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <functional>
#include <set>
#include <stdexcept>
#include <string>
#include <vector>

#include "optiflow/baselines/baseline.hpp"
#include "optiflow/schedule/schedule.hpp"
#include "optiflow/schedule/verifier.hpp"
#include "optiflow/support/error.hpp"
#include "optiflow/topology/bounds.hpp"
#include "optiflow/topology/generators.hpp"
#include "optiflow/topology/taccl_topology.hpp"

namespace optiflow::baselines {
namespace {

namespace fs = std::filesystem;
using support::Collective;

const fs::path kTaccl = fs::path(OPTIFLOW_EXTERNAL_DIR) / "taccl";

#define REQUIRE_TACCL_FILES() \
  if (!fs::is_directory(kTaccl)) GTEST_SKIP() << kTaccl << " is absent (TACCL's files)"

std::string topo_file(const std::string& name) {
  return (kTaccl / "topo" / name).string();
}
std::string sketch_file(const std::string& name) {
  return (kTaccl / "sketch" / name).string();
}

// A tight limit keeps every solve here to a second or two; the best incumbent is kept.
SynthesisOptions quick(std::string sketch = {}) {
  SynthesisOptions options;
  options.time_limit_s = 1;
  options.taccl_sketch = std::move(sketch);
  return options;
}

constexpr std::uint64_t kMiB = std::uint64_t{1} << 20;

// Two switched nodes of two GPUs, one NIC each: small enough for an exact solve in a moment.
constexpr const char* kTinyTopo = R"({"name": "tiny_1MB", "gpus_per_node": 2,
  "nics_per_node": 1, "alpha": 0.3, "node_betas_list": [8], "node_invbws_list": [8],
  "remote_alpha": 2.6, "remote_beta": 105, "remote_invbw": 107})";
constexpr const char* kTinyRelaySketch = R"({"nnodes": 2,
  "intranode_sketch": {"strategy": "none"},
  "internode_sketch": {"strategy": "relay", "internode_conn": {"0": [1]}},
  "symmetry_offsets": [[2, 4]], "hyperparameters": {"input_chunkup": 1}})";

std::string expect_input_error(const std::function<void()>& f) {
  try {
    f();
  } catch (const support::InputError& e) {
    return e.what();
  }
  ADD_FAILURE() << "no InputError";
  return {};
}

TEST(TacclTopology, ReadsNdv2AsTacclDoes) {
  REQUIRE_TACCL_FILES();
  const auto taccl = topology::read_taccl_topology(topo_file("topo-ndv2-1MB.json"), 2);
  const topology::TacclProfile& p = taccl.profile;
  EXPECT_EQ(p.kind, topology::TacclNodeKind::ndv2);
  EXPECT_EQ(p.gpus_per_node, 8);
  EXPECT_EQ(p.nics_per_node, 1);
  EXPECT_EQ(p.reference_bytes, kMiB);
  EXPECT_EQ(p.links[0][1], 1);  // generic.py's cube-mesh: 0-1 class 1, 0-2 class 2, 0-5 none
  EXPECT_DOUBLE_EQ(p.invbws[0][1], 23);
  EXPECT_DOUBLE_EQ(p.invbws[0][2], 46);
  EXPECT_EQ(p.links[0][5], 0);
  EXPECT_DOUBLE_EQ(p.remote_beta, 105);
  EXPECT_EQ(taccl.topology.rank_count(), 16);
  EXPECT_EQ(taccl.topology.host_count(), 2);
  // beta 23 us per MiB: 2^20 / 23 bytes per us.
  const auto out = taccl.topology.out_links(taccl.topology.gpu_of_rank(0));
  ASSERT_FALSE(out.empty());
  EXPECT_NEAR(taccl.topology.link(out.front()).bw_GBps, 1048576.0 / 23 / 1e3, 1e-9);
}

TEST(TacclTopology, ReadsEveryExampleFile) {
  REQUIRE_TACCL_FILES();
  for (const auto& entry : fs::directory_iterator(kTaccl / "topo")) {
    const auto taccl = topology::read_taccl_topology(entry.path().string(), 2);
    EXPECT_EQ(taccl.topology.rank_count(), 2 * taccl.profile.gpus_per_node) << entry.path();
  }
  EXPECT_EQ(
      topology::read_taccl_topology(topo_file("topo-ndv2-32KB.json"), 1).profile.reference_bytes,
      32u * 1024);
  EXPECT_EQ(topology::read_taccl_topology(topo_file("topo-dgx2-1MB.json"), 1).profile.kind,
            topology::TacclNodeKind::dgx2);
}

TEST(TacclTopology, MalformedFilesNameTheFileAndTheField) {
  EXPECT_NE(expect_input_error([] {
              topology::parse_taccl_topology(R"({"name": "x", "alpha": 1})", "t.json", 1);
            }).find("t.json: error: gpus_per_node"),
            std::string::npos);
  EXPECT_NE(expect_input_error([] {
              topology::parse_taccl_topology(
                  R"({"name": "NDv2_1MB", "gpus_per_node": 8, "alpha": 1,
                      "node_betas_list": [23], "node_invbws_list": [23, 46]})",
                  "t.json", 1);
            }).find("node_betas_list"),
            std::string::npos);
  EXPECT_NE(expect_input_error([] {
              topology::parse_taccl_topology(
                  R"({"name": "hub", "gpus_per_node": 4, "alpha": 1,
                      "node_betas_list": [8], "node_invbws_list": [8]})",
                  "t.json", 2);
            }).find("nics_per_node"),
            std::string::npos);
  EXPECT_NE(
      expect_input_error([] { topology::parse_taccl_topology("{", "t.json", 1); }).find("t.json:1"),
      std::string::npos);
}

TEST(TacclSketch, ReadsEveryExampleSketch) {
  REQUIRE_TACCL_FILES();
  for (const auto& entry : fs::directory_iterator(kTaccl / "sketch"))
    EXPECT_NO_THROW(read_taccl_sketch(entry.path().string())) << entry.path();
  const TacclSketch relay = read_taccl_sketch(sketch_file("sk1-ndv2-n2.json"));
  EXPECT_EQ(relay.nnodes, 2);
  EXPECT_EQ(relay.internode_conn, (std::map<int, std::vector<int>>{{0, {1}}}));
  EXPECT_EQ(relay.symmetry_offsets, (std::vector<std::pair<int, int>>{{8, 16}}));
  const TacclSketch dgx2 = read_taccl_sketch(sketch_file("sk1-dgx2-n2.json"));
  EXPECT_EQ(dgx2.intra, TacclIntraStrategy::switch_);
  EXPECT_EQ(dgx2.hyperedge, TacclHyperedge::uc_min);
  EXPECT_TRUE(dgx2.enforce_ordering);
  EXPECT_EQ(dgx2.chunk_to_relay.at(1), (std::vector<int>{0, 1}));
  EXPECT_EQ(dgx2.input_chunkup, 2);
  const TacclSketch full = read_taccl_sketch(sketch_file("sk2-ndv2-n2.json"));
  const auto conn = relay_map(full, 8);
  EXPECT_EQ(conn.size(), 8u);
  EXPECT_EQ(conn.at(3).size(), 8u);
}

TEST(TacclSketch, MalformedSketchesNameTheField) {
  const auto error = [](const std::string& text) {
    return expect_input_error([&] { parse_taccl_sketch(text, "s.json"); });
  };
  EXPECT_NE(error(R"({"nnodes": 1, "intranode_sketch": {"strategy": "ring"},
                     "symmetry_offsets": [], "hyperparameters": {"input_chunkup": 1}})")
                .find("intranode_sketch.strategy: unknown strategy 'ring'"),
            std::string::npos);
  EXPECT_NE(error(R"({"nnodes": 2, "intranode_sketch": {"strategy": "none"},
                     "symmetry_offsets": [], "hyperparameters": {"input_chunkup": 1}})")
                .find("internode_sketch"),
            std::string::npos);
  EXPECT_NE(error(R"({"nnodes": 1, "intranode_sketch": {"strategy": "none"},
                     "symmetry_offsets": []})")
                .find("s.json: error: hyperparameters"),
            std::string::npos);
  EXPECT_NE(error(R"({"nnodes": 2, "intranode_sketch": {"strategy": "none"},
                     "internode_sketch": {"strategy": "relay", "internode_conn": {"a": [1]}},
                     "symmetry_offsets": [], "hyperparameters": {"input_chunkup": 1}})")
                .find("internode_sketch.internode_conn.a"),
            std::string::npos);
}

TEST(TacclSketch, DefaultSketchFollowsTheTopology) {
  const TacclSketch a100 = default_taccl_sketch(*topology::make_builtin_topology("a100x4"));
  EXPECT_EQ(a100.nnodes, 4);
  EXPECT_EQ(a100.intra, TacclIntraStrategy::switch_);
  EXPECT_EQ(a100.internode_conn_name, "direct-map");
  EXPECT_EQ(a100.symmetry_offsets, (std::vector<std::pair<int, int>>{{1, 8}, {8, 32}}));
  const TacclSketch dgx1 = default_taccl_sketch(*topology::make_builtin_topology("dgx1"));
  EXPECT_EQ(dgx1.intra, TacclIntraStrategy::none);
  // The cube-mesh maps onto itself by swapping its two quads (ranks 0-3 and 4-7), not by +1.
  EXPECT_EQ(dgx1.symmetry_offsets, (std::vector<std::pair<int, int>>{{4, 8}}));
  // NDv2 leaves its node through local GPU 0 only: swapping the quads would move the relay.
  const TacclSketch ndv2 = default_taccl_sketch(*topology::make_builtin_topology("ndv2x2"));
  EXPECT_EQ(ndv2.internode_conn, (std::map<int, std::vector<int>>{{0, {1}}}));
  EXPECT_EQ(ndv2.symmetry_offsets, (std::vector<std::pair<int, int>>{{8, 16}}));
}

TEST(Taccl, Dgx1VerifiesAndSimulates) {
  const auto topo = *topology::make_builtin_topology("dgx1");
  const std::uint64_t sizes[] = {kMiB};
  const BaselineRun run = run_baseline("taccl", topo, Collective::all_gather, sizes, {}, quick());
  ASSERT_TRUE(run.solver);
  EXPECT_EQ(run.solver->solver.rfind("CBC", 0), 0u);
  EXPECT_EQ(run.schedule.ranks, 8);
  EXPECT_EQ(run.schedule.chunks, 8);  // input_chunkup 1: one chunk per rank
  ASSERT_EQ(run.rows.size(), 1u);
  // Which incumbent CBC holds at the one-second limit depends on the machine: the heuristic
  // start simulates to 1.29x the bound, the optimal routing to 1.44x. Either beats NCCL's ring
  // (1.55x), and nothing beats the bound.
  const double time_us = run.rows[0].sim.time_us;
  EXPECT_GE(time_us, topology::LowerBound::compute(topo, Collective::all_gather).at(kMiB).time_us);
  EXPECT_LT(time_us, run_baseline("nccl", topo, Collective::all_gather, sizes).rows[0].sim.time_us);
}

// A node limit, unlike a time limit, gives the same schedule however busy the machine is:
// explore's floor depends on it.
TEST(Taccl, ANodeLimitGivesTheSameScheduleEveryTime) {
  const auto topo = *topology::make_builtin_topology("dgx1");
  SynthesisOptions options;
  options.max_nodes = 100;
  const Synthesized first = taccl_synthesize(topo, Collective::all_gather, options);
  const Synthesized second = taccl_synthesize(topo, Collective::all_gather, options);
  EXPECT_EQ(first.schedule, second.schedule);
  EXPECT_EQ(first.solver.status, second.solver.status);
}

// uc-min prefers few GPU pairs on the switch: the solver's routing is one ring through all 8.
TEST(Taccl, A100NodeWithTheDefaultSwitchSketch) {
  const auto topo = *topology::make_builtin_topology("a100x1");
  const std::uint64_t sizes[] = {kMiB};
  const BaselineRun run = run_baseline("taccl", topo, Collective::all_gather, sizes, {}, quick());
  ASSERT_EQ(run.schedule.ranks, 8);
  std::vector<int> next(8, -1);
  for (int rank = 0; rank < 8; ++rank)
    for (const auto& tb : run.schedule.programs[static_cast<std::size_t>(rank)].tbs)
      if (tb.send_peer >= 0) {
        EXPECT_EQ(next[static_cast<std::size_t>(rank)], -1) << "rank " << rank << ": two peers";
        next[static_cast<std::size_t>(rank)] = tb.send_peer;
      }
  std::set<int> ring;
  int rank = 0;
  for (int hop = 0; hop < 8 && rank >= 0; ++hop) {
    ring.insert(rank);
    rank = next[static_cast<std::size_t>(rank)];
  }
  EXPECT_EQ(ring.size(), 8u);
  EXPECT_EQ(rank, 0);
  // 8 chunks of 7 hops, each a send and a receive.
  EXPECT_EQ(run.schedule.step_count(), 2u * 8 * 7);
  // A ring's All-Gather with LL at 1 MiB takes L + 7 (l + w), w one chunk's wire time on the
  // NVSwitch port (alpha 0; docs/cost-model.md, "Closed forms"); the bound is L + l + 7 w.
  ASSERT_EQ(run.rows.size(), 1u);
  EXPECT_EQ(run.rows[0].sim.protocol, topology::Protocol::ll);
  const double step_us =
      topology::protocol_costs(topology::Protocol::ll).step_latency(topology::HopClass::nvlink);
  const double bound_us =
      topology::LowerBound::compute(topo, Collective::all_gather).at(kMiB).time_us;
  EXPECT_NEAR(run.rows[0].sim.time_us, bound_us + 6 * step_us, 1e-9);
}

// What TACCL's evaluation sweeps: chunks per GPU set the synthesizer's chunk space, instances
// replicate its schedule on channels of their own; both stay verified.
TEST(Taccl, ChunksAndInstancesAsTacclSweepsThem) {
  const auto topo = *topology::make_builtin_topology("a100x1");
  const std::uint64_t sizes[] = {kMiB};
  SynthesisOptions options = quick();
  options.taccl_chunks = 2;
  options.taccl_instances = 3;
  const BaselineRun run = run_baseline("taccl", topo, Collective::all_gather, sizes, {}, options);
  EXPECT_EQ(run.schedule.chunks, 8 * 2 * 3);
  EXPECT_TRUE(schedule::verify_schedule(run.schedule).ok());
  std::set<int> channels;
  for (const auto& tb : run.schedule.programs[0].tbs) channels.insert(tb.channel);
  EXPECT_EQ(channels.size(), 3u);
  options.taccl_instances = 0;
  EXPECT_THROW(taccl_synthesize(topo, Collective::all_gather, options), std::invalid_argument);
}

TEST(Taccl, Ndv2OneNodeFromTacclsFiles) {
  REQUIRE_TACCL_FILES();
  auto taccl = topology::read_taccl_topology(topo_file("topo-ndv2-1MB.json"), 1);
  SynthesisOptions options = quick(sketch_file("sk1-ndv2-n1.json"));
  options.taccl_profile = taccl.profile;
  const std::uint64_t sizes[] = {kMiB, 64 * kMiB};
  const BaselineRun run =
      run_baseline("taccl", taccl.topology, Collective::all_gather, sizes, {}, options);
  EXPECT_EQ(run.schedule.ranks, 8);
  ASSERT_EQ(run.rows.size(), 2u);
  EXPECT_LT(run.rows[0].sim.time_us, run.rows[1].sim.time_us);
}

// With no time for CBC the cheapest-path start is the answer: a schedule that still verifies.
TEST(Taccl, HeuristicStartAnswersWhenCbcHasNoTime) {
  REQUIRE_TACCL_FILES();
  auto taccl = topology::read_taccl_topology(topo_file("topo-ndv2-1MB.json"), 1);
  SynthesisOptions options = quick(sketch_file("sk1-ndv2-n1.json"));
  options.taccl_profile = taccl.profile;
  options.time_limit_s = 0.01;
  const Synthesized built = taccl_synthesize(taccl.topology, Collective::all_gather, options);
  EXPECT_TRUE(schedule::verify_schedule(built.schedule, &taccl.topology).ok());
  EXPECT_NE(built.solver.status.find("routing feasible (time limit"), std::string::npos)
      << built.solver.status;
  ASSERT_TRUE(built.solver.gap);
  EXPECT_GT(*built.solver.gap, 0);
}

// The relay map {"0": [1]}: a chunk leaves a node only from local GPU 0 and enters the other
// only at local GPU 1.
TEST(Taccl, InterNodeSendsOnlyFromRelayGpus) {
  auto taccl = topology::parse_taccl_topology(kTinyTopo, "tiny.json", 2);
  const fs::path sketch =
      fs::temp_directory_path() / ("taccl-tiny-" + std::to_string(::getpid()) + ".json");
  { std::ofstream(sketch) << kTinyRelaySketch; }
  SynthesisOptions options = quick(sketch.string());
  options.taccl_profile = taccl.profile;
  const Synthesized built = taccl_synthesize(taccl.topology, Collective::all_gather, options);
  fs::remove(sketch);
  EXPECT_TRUE(schedule::verify_schedule(built.schedule, &taccl.topology).ok());
  int remote_sends = 0;
  for (int rank = 0; rank < 4; ++rank)
    for (const auto& tb : built.schedule.programs[static_cast<std::size_t>(rank)].tbs)
      if (tb.send_peer >= 0 && tb.send_peer / 2 != rank / 2 && !tb.steps.empty()) {
        EXPECT_EQ(rank % 2, 0) << "rank " << rank << " sends to another node";
        EXPECT_EQ(tb.send_peer % 2, 1) << "rank " << rank << " sends to " << tb.send_peer;
        remote_sends += static_cast<int>(tb.steps.size());
      }
  EXPECT_GE(remote_sends, 2);  // each node's two chunks cross, in one or two steps
  EXPECT_EQ(built.solver.status, "optimal (both MILPs)");
}

TEST(Taccl, RejectsOtherCollectives) {
  const auto topo = *topology::make_builtin_topology("dgx1");
  try {
    taccl_synthesize(topo, Collective::all_reduce, quick());
    ADD_FAILURE() << "no UnsupportedError";
  } catch (const support::UnsupportedError& e) {
    EXPECT_NE(e.message().find("allgather only"), std::string::npos) << e.message();
  }
}

}  // namespace
}  // namespace optiflow::baselines
