// The batch evaluator on its own: each program evaluated once, repeats answered from its
// cache, results against the bound, and nothing depending on the number of threads.
#include "batch_evaluator.hpp"

#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "optiflow/topology/generators.hpp"

namespace optiflow::explore {
namespace {

class BatchEvaluatorTest : public ::testing::Test {
 protected:
  std::vector<Candidate> evaluate(const std::vector<std::string>& sources) {
    std::vector<Candidate> batch;
    for (const std::string& source : sources) batch.push_back(Candidate::of({source, "test", 0}));
    evaluator_.evaluate(batch);
    return batch;
  }
  // A second evaluator with its own cache: what another process would compute.
  std::vector<Candidate> evaluate_fresh(const std::vector<std::string>& sources, unsigned threads) {
    BatchEvaluator other(topo_, support::Collective::all_gather, reference_, threads);
    std::vector<Candidate> batch;
    for (const std::string& source : sources) batch.push_back(Candidate::of({source, "test", 0}));
    other.evaluate(batch);
    return batch;
  }

  const topology::Topology topo_ = topology::make_ring(8);
  const Reference reference_ =
      Reference::compute(topo_, support::Collective::all_gather, {1024, 1 << 20, 1 << 30});
  BatchEvaluator evaluator_{topo_, support::Collective::all_gather, reference_, 1};
};

TEST_F(BatchEvaluatorTest, ARingIsCompiledSimulatedAndMeasuredAgainstTheBound) {
  const auto batch = evaluate({"ring over all\n"});
  ASSERT_TRUE(batch[0].ok()) << batch[0].diagnostics();
  EXPECT_FALSE(batch[0].reused);
  // One ring on 8 ranks: each rank sends 7 chunks and receives 7.
  EXPECT_EQ(batch[0].compiled.steps, 8 * 7 * 2);
  const auto& results = batch[0].simulated.results;
  ASSERT_EQ(results.size(), 3u);
  for (std::size_t s = 0; s < results.size(); ++s) {
    EXPECT_EQ(results[s].size_bytes, reference_.sizes[s]);
    EXPECT_EQ(results[s].bound_us, reference_.bound_us[s]);
    EXPECT_GE(results[s].x_bound(), 1.0);
    EXPECT_FALSE(results[s].measured);
  }
  // ring8's links go both ways and the bound counts both; one ring uses one direction, so at
  // 1 GiB (where latency is nothing) it takes twice the bound, to 0.1%.
  EXPECT_NEAR(results[2].x_bound(), 2.0, 0.002);
  EXPECT_EQ(batch[0].simulated.busiest_links.size(), 3u);
  EXPECT_NE(batch[0].simulated.critical_path.find("at 1K: "), std::string::npos);
  EXPECT_NE(batch[0].simulated.critical_path.find("; at 1G: "), std::string::npos);
}

TEST_F(BatchEvaluatorTest, RepeatsInABatchAndAcrossBatchesAreReusedNotEvaluatedAgain) {
  const auto first = evaluate({"ring over all\n", "ring  over   all\n", "ring over\n"});
  ASSERT_TRUE(first[0].ok());
  EXPECT_FALSE(first[0].reused);
  EXPECT_TRUE(first[1].reused);  // the same canonical program
  EXPECT_EQ(first[1].compiled.schedule_hash, first[0].compiled.schedule_hash);
  EXPECT_EQ(first[1].simulated.results[2].time_us, first[0].simulated.results[2].time_us);
  EXPECT_FALSE(first[2].ok());
  EXPECT_NE(first[2].diagnostics().find("candidate:1:"), std::string::npos)
      << first[2].diagnostics();

  const auto second = evaluate({"ring over all\n"});
  EXPECT_TRUE(second[0].reused);
  EXPECT_TRUE(second[0].ok());
  EXPECT_EQ(second[0].compiled.schedule.step_count(), 0u) << "a reused result keeps no schedule";
  EXPECT_EQ(second[0].simulated.results[0].time_us, first[0].simulated.results[0].time_us);
}

TEST_F(BatchEvaluatorTest, ResultsDoNotDependOnTheThreadsOrOnTheCache) {
  const std::vector<std::string> programs = {"ring over all\n", "rd over all\n",
                                             "direct over all\n", "bruck over all\n",
                                             "ring over all\n"};
  const auto one = evaluate_fresh(programs, 1);
  const auto two = evaluate_fresh(programs, 2);
  ASSERT_EQ(one.size(), two.size());
  for (std::size_t i = 0; i < one.size(); ++i) {
    EXPECT_EQ(one[i].ok(), two[i].ok()) << programs[i];
    EXPECT_EQ(one[i].reused, two[i].reused) << programs[i];
    EXPECT_EQ(one[i].compiled.schedule_hash, two[i].compiled.schedule_hash) << programs[i];
    ASSERT_EQ(one[i].simulated.results.size(), two[i].simulated.results.size());
    for (std::size_t s = 0; s < one[i].simulated.results.size(); ++s)
      EXPECT_EQ(one[i].simulated.results[s].time_us, two[i].simulated.results[s].time_us);
  }
}

}  // namespace
}  // namespace optiflow::explore
