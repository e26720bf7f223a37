// The explore evaluator compiles proposals, possibly hostile ones, within a budget: a candidate
// that would exceed it is recorded as rejected, with the compiler's message, quickly.
#include "evaluator.hpp"

#include <gtest/gtest.h>

#include <chrono>
#include <string>

#include "optiflow/topology/generators.hpp"

namespace optiflow::explore {
namespace {

Compiled compile(const std::string& program, const topology::Topology& topo,
                 const CandidateBudget& budget = {}) {
  const Parsed parsed = parse_candidate(program);
  EXPECT_TRUE(parsed.diagnostics.empty()) << parsed.diagnostics;
  return compile_candidate(parsed, topo, support::Collective::all_gather, budget);
}

TEST(ExploreEvaluator, CompilesAndVerifiesACandidate) {
  const Compiled c = compile("ring over all\n", topology::make_a100(2));
  EXPECT_TRUE(c.ok) << c.diagnostics;
  // 16 ranks, one chunk each; every chunk makes 15 hops, each hop a send on one rank and a
  // receive on the next.
  EXPECT_EQ(c.chunks, 16);
  EXPECT_EQ(c.steps, 2 * 16 * 15);
  EXPECT_FALSE(c.schedule_hash.empty());
}

TEST(ExploreEvaluator, AHostileCandidateIsRejectedQuicklyWithItsMessage) {
  const auto start = std::chrono::steady_clock::now();
  const Compiled c = compile("pipeline 64\nchannels 32\nsplit 64 as r { ring over all }\n",
                             topology::make_a100(16));
  const std::chrono::duration<double> spent = std::chrono::steady_clock::now() - start;
  EXPECT_FALSE(c.ok);
  EXPECT_NE(c.diagnostics.find("candidate:3:1: error:"), std::string::npos) << c.diagnostics;
  EXPECT_NE(c.diagnostics.find("chunks per buffer"), std::string::npos) << c.diagnostics;
  EXPECT_LT(spent.count(), 5.0);
}

TEST(ExploreEvaluator, TheBudgetBoundsEachCandidate) {
  const topology::Topology topo = topology::make_a100(4);
  CandidateBudget small;
  small.limits.max_transfers = 1000;  // a ring on 32 ranks makes 992; eight rings, 7,936
  EXPECT_TRUE(compile("ring over all\n", topo, small).ok);
  const Compiled rings = compile(
      "split nlocal as r {\n  ring over all by (host, (local - r) % nlocal)\n}\n", topo, small);
  EXPECT_FALSE(rings.ok);
  EXPECT_NE(rings.diagnostics.find("more than 1000 transfers"), std::string::npos)
      << rings.diagnostics;

  CandidateBudget instant;
  instant.time_limit_s = 1e-9;
  const Compiled late = compile("ring over all\n", topo, instant);
  EXPECT_FALSE(late.ok);
  EXPECT_NE(late.diagnostics.find("time limit"), std::string::npos) << late.diagnostics;
}

TEST(ExploreEvaluator, TheDefaultBudgetAdmitsEightRingsOn256Gpus) {
  const Compiled c =
      compile("split nlocal as r {\n  ring over all by (host, (local - r) % nlocal)\n}\n",
              topology::make_a100(32));
  EXPECT_TRUE(c.ok) << c.diagnostics;
}

}  // namespace
}  // namespace optiflow::explore
