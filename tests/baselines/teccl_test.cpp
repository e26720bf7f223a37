// The TE-CCL baseline: its epoch search finds the least epoch count on fabrics small enough to
// work out by hand, its schedules meet every demand and verify in each mode, and the simulated
// time stays within what its epochs promise where nothing is shared.
#include <gtest/gtest.h>

#include <cstdint>
#include <cstdio>
#include <stdexcept>
#include <string>

#include "optiflow/baselines/baseline.hpp"
#include "optiflow/baselines/synthesis.hpp"
#include "optiflow/schedule/verifier.hpp"
#include "optiflow/sim/simulator.hpp"
#include "optiflow/support/error.hpp"
#include "optiflow/topology/generators.hpp"

namespace optiflow::baselines {
namespace {

using support::Collective;

constexpr std::uint64_t kGiB = std::uint64_t{1} << 30;

topology::Topology builtin(const std::string& name) {
  return *topology::make_builtin_topology(name);
}

SynthesisOptions tight(TecclMode mode) {
  SynthesisOptions options;
  options.teccl_mode = mode;
  options.time_limit_s = 5;
  return options;
}

// The epoch count the synthesizer reports in its first note ("N epochs of one chunk ...").
int epochs_of(const Synthesized& s) {
  int epochs = -1;
  EXPECT_FALSE(s.notes.empty());
  if (!s.notes.empty()) std::sscanf(s.notes.front().c_str(), "%d epochs", &epochs);
  return epochs;
}

void expect_verified(const Synthesized& s, const topology::Topology& topo) {
  const schedule::VerifyResult verdict = schedule::verify_schedule(s.schedule, &topo);
  EXPECT_TRUE(verdict.ok()) << verdict.summary();
  // Every rank receives each of the other ranks' chunks exactly once.
  std::size_t receives = 0;
  for (const auto& program : s.schedule.programs)
    for (const auto& tb : program.tbs)
      for (const auto& step : tb.steps) receives += step.kind == schedule::StepKind::recv;
  const auto n = static_cast<std::size_t>(s.schedule.ranks);
  EXPECT_EQ(receives, n * static_cast<std::size_t>(s.schedule.chunks) - s.schedule.chunks);
}

// ring4: 3 chunks to receive over 2 in-links, and the far GPU 2 hops away: at least 2 epochs;
// sending both ways, then forwarding once, takes 2.
TEST(Teccl, MilpFindsTheLeastEpochsOnARingOfFour) {
  const topology::Topology topo = builtin("ring4");
  const Synthesized s = teccl_synthesize(topo, Collective::all_gather, tight(TecclMode::milp));
  EXPECT_EQ(epochs_of(s), 2);
  expect_verified(s, topo);
  EXPECT_EQ(s.solver.solver.rfind("CBC ", 0), 0u) << s.solver.solver;
  EXPECT_EQ(s.solver.status, "optimal");
  ASSERT_TRUE(s.solver.gap.has_value());
  EXPECT_NEAR(*s.solver.gap, 0.0, 1e-9);
}

// ring6: 5 chunks over 2 in-links and a GPU 3 hops away: 3 epochs. fullmesh4: every GPU
// sends to all three peers at once: 1 epoch. a100x1: each GPU's one NVSwitch port takes one
// chunk per epoch, 7 to receive: 7 epochs. dgx1 (epoch: a 40 GB/s doubled NVLink): a GPU's
// links bring in 1 + 1 + 0.5 + 0.5 chunks per epoch, 7 to receive: at least 3 epochs, and the
// search's MILP probe finds 3 where the LP's greedy rounding needs more.
TEST(Teccl, MilpFindsTheLeastEpochsWorkedOutByHand) {
  for (const auto& [name, least] : std::initializer_list<std::pair<const char*, int>>{
           {"ring6", 3}, {"fullmesh4", 1}, {"a100x1", 7}, {"dgx1", 3}}) {
    const topology::Topology topo = builtin(name);
    const Synthesized s = teccl_synthesize(topo, Collective::all_gather, tight(TecclMode::milp));
    EXPECT_EQ(epochs_of(s), least) << name;
    EXPECT_EQ(s.solver.status, "optimal") << name;
    expect_verified(s, topo);
  }
}

// Two chunks per GPU on ring4: 6 to receive over 2 in-links: 3 epochs, 2 hops of pipelining
// fit inside them.
TEST(Teccl, MoreChunksPerGpuPipeline) {
  const topology::Topology topo = builtin("ring4");
  SynthesisOptions options = tight(TecclMode::milp);
  options.teccl_chunks = 2;
  const Synthesized s = teccl_synthesize(topo, Collective::all_gather, options);
  EXPECT_EQ(s.schedule.chunks, 8);
  EXPECT_EQ(epochs_of(s), 3);
  expect_verified(s, topo);
}

// Where no link is shared (ring4, one chunk per link per epoch), the simulated time at 1 GiB is
// within the epochs' worth of transfer time, plus the protocol's per-step costs.
TEST(Teccl, SimulatedTimeIsNoWorseThanTheEpochsImply) {
  const topology::Topology topo = builtin("ring4");
  const Synthesized s = teccl_synthesize(topo, Collective::all_gather, tight(TecclMode::milp));
  const double chunk_bytes = static_cast<double>(kGiB) / s.schedule.chunks;
  const double link_GBps = topo.links().front().bw_GBps;
  const double epoch_us = chunk_bytes / (link_GBps * 1e3);
  sim::SimOptions options;
  options.protocol = topology::Protocol::simple;
  const double time_us = sim::Simulator(topo, s.schedule, options).run(kGiB).time_us;
  EXPECT_LE(time_us, epochs_of(s) * epoch_us * 1.05);
  EXPECT_GE(time_us, (epochs_of(s) - 0.5) * epoch_us);  // and it does use both epochs
}

TEST(Teccl, LpModeRoundsTheRelaxationIntoAVerifiedSchedule) {
  for (const char* name : {"ring6", "a100x1", "dgx1"}) {
    const topology::Topology topo = builtin(name);
    const Synthesized s = teccl_synthesize(topo, Collective::all_gather, tight(TecclMode::lp));
    EXPECT_EQ(s.solver.solver.rfind("CLP ", 0), 0u) << name;
    EXPECT_FALSE(s.solver.gap.has_value()) << name;
    EXPECT_GT(epochs_of(s), 0) << name;
    expect_verified(s, topo);
  }
}

TEST(Teccl, AstarModeSolvesRoundByRound) {
  for (const char* name : {"ring6", "a100x1", "a100x2"}) {
    const topology::Topology topo = builtin(name);
    SynthesisOptions options = tight(TecclMode::astar);
    options.teccl_epoch = TecclEpoch::slowest;
    const Synthesized s = teccl_synthesize(topo, Collective::all_gather, options);
    EXPECT_NE(s.solver.status.find("rounds optimal"), std::string::npos) << s.solver.status;
    EXPECT_GT(epochs_of(s), 0) << name;
    expect_verified(s, topo);
  }
}

// Through run_baseline: the same verifier and simulator as every other schedule.
TEST(Teccl, RunsAsABaselineWithItsSolverReport) {
  SynthesisOptions options = tight(TecclMode::milp);
  const BaselineRun run = run_baseline("teccl", builtin("dgx1"), Collective::all_gather,
                                       std::vector<std::uint64_t>{1 << 20, kGiB}, {}, options);
  ASSERT_TRUE(run.solver.has_value());
  EXPECT_GT(run.solver->seconds, 0);
  ASSERT_EQ(run.rows.size(), 2u);
  EXPECT_GT(run.rows[1].sim.time_us, run.rows[0].sim.time_us);
}

TEST(Teccl, BuildsAllGatherOnly) {
  EXPECT_THROW(teccl_synthesize(builtin("ring4"), Collective::reduce_scatter, {}),
               support::UnsupportedError);
  SynthesisOptions negative;
  negative.teccl_chunks = -1;
  EXPECT_THROW(teccl_synthesize(builtin("ring4"), Collective::all_gather, negative),
               std::invalid_argument);
}

}  // namespace
}  // namespace optiflow::baselines
