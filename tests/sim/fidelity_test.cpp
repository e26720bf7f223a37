// The fidelity report on hand-made points: errors, Kendall tau, the pick and its regret.
#include "optiflow/sim/fidelity.hpp"

#include <gtest/gtest.h>

namespace optiflow::sim {
namespace {

using support::Collective;

FidelityPoint point(const char* name, std::uint64_t size, double sim, double measured) {
  return FidelityPoint{Collective::all_gather, 8, size, name, sim, measured};
}

TEST(Fidelity, SameOrderIsTauOneAndThePickIsTheBest) {
  const std::vector<FidelityPoint> points{point("a", 1024, 10, 20), point("b", 1024, 20, 40),
                                          point("c", 1024, 30, 60)};
  const FidelityReport r = fidelity(points);
  EXPECT_EQ(r.points, 3u);
  EXPECT_DOUBLE_EQ(r.median_error, 0.5);
  EXPECT_DOUBLE_EQ(r.worst_error, 0.5);
  ASSERT_EQ(r.groups.size(), 1u);
  EXPECT_DOUBLE_EQ(r.groups[0].kendall_tau, 1.0);
  EXPECT_EQ(r.groups[0].simulator_pick, "a");
  EXPECT_EQ(r.picks_best, 1u);
  EXPECT_DOUBLE_EQ(r.median_regret, 1.0);
}

TEST(Fidelity, ReversedOrderIsTauMinusOneAndTheRegretIsTheMeasuredRatio) {
  const std::vector<FidelityPoint> points{point("a", 1024, 10, 60), point("b", 1024, 20, 40),
                                          point("c", 1024, 30, 30)};
  const FidelityReport r = fidelity(points);
  ASSERT_EQ(r.groups.size(), 1u);
  EXPECT_DOUBLE_EQ(r.groups[0].kendall_tau, -1.0);
  EXPECT_EQ(r.groups[0].simulator_pick, "a");
  EXPECT_EQ(r.groups[0].measured_best, "c");
  EXPECT_DOUBLE_EQ(r.groups[0].regret, 2.0);
  EXPECT_EQ(r.picks_within_tol, 0u);
}

TEST(Fidelity, GroupsBySizeTiesCountAsNeitherAndLoneSchedulesHaveNoGroup) {
  const std::vector<FidelityPoint> points{
      point("a", 1024, 10, 10), point("b", 1024, 10, 20),
      point("c", 1024, 30, 21), point("a", 2048, 10, 10),  // alone at its size
      point("a", 1024, 99, 99),  // a schedule named twice in a group counts once
  };
  const FidelityReport r = fidelity(points);
  EXPECT_EQ(r.points, 4u);
  ASSERT_EQ(r.groups.size(), 1u);
  // a<b: simulated tie (neither); a<c and b<c agree: (2 - 0) / 3 pairs.
  EXPECT_NEAR(r.groups[0].kendall_tau, 2.0 / 3.0, 1e-12);
  EXPECT_EQ(r.groups[0].schedules, 3u);
}

TEST(Fidelity, WithinTheToleranceCountsAsAGoodPick) {
  const std::vector<FidelityPoint> points{point("a", 1024, 10, 10.5), point("b", 1024, 20, 10)};
  const FidelityReport r = fidelity(points);
  EXPECT_EQ(r.picks_best, 0u);
  EXPECT_EQ(r.picks_within_tol, 1u);
  EXPECT_DOUBLE_EQ(r.worst_regret, 1.05);
}

}  // namespace
}  // namespace optiflow::sim
