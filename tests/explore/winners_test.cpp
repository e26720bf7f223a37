// The winners per size on their own: simulated times compete until a size has a measured
// winner, then only a faster measurement replaces it; the files and the flow figure at the end.
#include "winners.hpp"

#include <gtest/gtest.h>
#include <unistd.h>

#include <filesystem>
#include <string>
#include <vector>

#include "batch_evaluator.hpp"
#include "optiflow/topology/generators.hpp"

namespace optiflow::explore {
namespace {

namespace fs = std::filesystem;

class WinnersTest : public ::testing::Test {
 protected:
  // Two candidates evaluated for real, for the winners' files.
  void SetUp() override {
    for (const char* source : {"ring over all\n", "rd over all\n"})
      batch_.push_back(Candidate::of({source, "test", 0}));
    evaluator_.evaluate(batch_);
    for (const Candidate& c : batch_) ASSERT_TRUE(c.ok()) << c.diagnostics();
  }
  void TearDown() override { fs::remove_all(out_); }

  static propose::Parent parent(const Candidate& c) {
    return propose::Parent{c.stored_source(), c.simulated.results, {}, {}, {}, {}};
  }
  Candidate& ring() { return batch_[0]; }
  Candidate& rd() { return batch_[1]; }

  const topology::Topology topo_ = topology::make_fullmesh(8);
  const Reference reference_ =
      Reference::compute(topo_, support::Collective::all_gather, {1024, 1 << 30});
  BatchEvaluator evaluator_{topo_, support::Collective::all_gather, reference_, 1};
  std::vector<Candidate> batch_;
  Winners winners_{reference_};
  fs::path out_ = fs::temp_directory_path() / ("optiflow_winners_test_" + std::to_string(getpid()));
};

// A candidate with the given simulated times (one per size), as the evaluator leaves it.
Candidate simulated(const std::string& source, const std::vector<double>& time_us,
                    const Reference& reference) {
  Candidate c = Candidate::of({source, "test", 0});
  c.parsed.canonical = source;
  c.compiled.ok = true;
  for (std::size_t s = 0; s < time_us.size(); ++s) {
    support::SizeResult r;
    r.size_bytes = reference.sizes[s];
    r.time_us = time_us[s];
    r.bound_us = reference.bound_us[s];
    c.simulated.results.push_back(r);
  }
  return c;
}

TEST_F(WinnersTest, EachSizeKeepsItsFastestSimulatedSchedule) {
  Candidate fast_small = simulated("a\n", {10, 5000}, reference_);
  Candidate fast_large = simulated("b\n", {20, 4000}, reference_);
  Candidate slower = simulated("c\n", {15, 4500}, reference_);
  winners_.record(fast_small, 1, parent(fast_small), nullptr);
  EXPECT_TRUE(winners_.improves_some_size(fast_large, nullptr));
  winners_.record(fast_large, 2, parent(fast_large), nullptr);
  EXPECT_FALSE(winners_.improves_some_size(slower, nullptr));

  Progress progress;
  winners_.fill(progress);
  ASSERT_EQ(progress.best_bound_ratio.size(), 2u);
  EXPECT_DOUBLE_EQ(progress.best_bound_ratio[0], 10 / reference_.bound_us[0]);
  EXPECT_DOUBLE_EQ(progress.best_bound_ratio[1], 4000 / reference_.bound_us[1]);
  const auto best = winners_.best_programs();
  ASSERT_EQ(best.size(), 2u);  // one per distinct winner, smallest size first
  EXPECT_EQ(best[0].source, "a\n");
  EXPECT_EQ(best[1].source, "b\n");
}

TEST_F(WinnersTest, AMeasuredWinnerIsReplacedOnlyByAFasterMeasurement) {
  Candidate first = simulated("a\n", {30, 5000}, reference_);
  const std::vector<double> measured = {500, 90000};
  winners_.record(first, 1, parent(first), &measured);
  // Once a size has a measured winner, simulated times no longer compete there.
  EXPECT_FALSE(winners_.improves_some_size(rd(), nullptr));
  const std::vector<double> slower = {600, 100000}, faster_small = {400, 100000};
  EXPECT_FALSE(winners_.improves_some_size(rd(), &slower));
  EXPECT_TRUE(winners_.improves_some_size(rd(), &faster_small));
}

// A baseline of the floor holds a size until a program beats it there; proposers are never
// shown it as a program, and its schedule is written like a program's.
TEST_F(WinnersTest, ABaselineHoldsASizeUntilAProgramBeatsIt) {
  std::vector<support::SizeResult> baseline(2);
  for (std::size_t s = 0; s < 2; ++s) {
    baseline[s].size_bytes = reference_.sizes[s];
    baseline[s].time_us = s == 0 ? 15 : 4500;
  }
  winners_.offer_baseline(
      "nccl-ring", std::make_shared<const schedule::Schedule>(ring().compiled.schedule), baseline);
  Candidate slower = simulated("c\n", {20, 4600}, reference_);
  EXPECT_FALSE(winners_.improves_some_size(slower, nullptr));
  Candidate faster_large = simulated("b\n", {20, 4000}, reference_);
  faster_large.compiled.schedule = rd().compiled.schedule;  // what write() simulates
  EXPECT_TRUE(winners_.improves_some_size(faster_large, nullptr));
  winners_.record(faster_large, 2, parent(faster_large), nullptr);
  // A slower baseline offered later takes nothing.
  baseline[1].time_us = 4200;
  winners_.offer_baseline(
      "forestcoll", std::make_shared<const schedule::Schedule>(rd().compiled.schedule), baseline);

  const auto best = winners_.best_programs();
  ASSERT_EQ(best.size(), 1u);
  EXPECT_EQ(best[0].source, "b\n");
  winners_.record(ring(), 7, parent(ring()), nullptr);  // slower than both at 1 GiB
  const auto written = winners_.write(out_.string(), topo_, support::Collective::all_gather);
  ASSERT_EQ(written.size(), 2u);
  EXPECT_EQ(written[1].program_id, 2);
  EXPECT_TRUE(written[1].baseline.empty());
  if (ring().simulated.results[0].time_us >= 15) {
    EXPECT_EQ(written[0].baseline, "nccl-ring");
    EXPECT_EQ(written[0].program_id, 0);
    EXPECT_DOUBLE_EQ(written[0].simulated.time_us, 15);
    EXPECT_DOUBLE_EQ(written[0].simulated.bound_us, reference_.bound_us[0]);
    EXPECT_TRUE(fs::exists(written[0].schedule_path));
  }
}

TEST_F(WinnersTest, WritesEachWinnersScheduleAndXmlAndItsFlowFigure) {
  winners_.record(ring(), 7, parent(ring()), nullptr);
  const auto written = winners_.write(out_.string(), topo_, support::Collective::all_gather);
  ASSERT_EQ(written.size(), 2u);
  for (const SizeWinner& w : written) {
    EXPECT_EQ(w.program_id, 7);
    EXPECT_TRUE(fs::exists(w.schedule_path)) << w.schedule_path;
    EXPECT_TRUE(fs::exists(w.msccl_path)) << w.msccl_path;
    EXPECT_GT(w.flow_busbw_GBps, 0);
    // The flow model shares links and never beats the bound.
    EXPECT_LE(w.flow_busbw_GBps, w.simulated.busbw_GBps * w.simulated.x_bound() * (1 + 1e-9));
  }
  EXPECT_EQ(written[1].schedule_path, out_.string() + "/allgather-fullmesh8-1073741824.json");
  EXPECT_EQ(written[0].nccl.choice.empty(), reference_.nccl.empty());
}

}  // namespace
}  // namespace optiflow::explore
