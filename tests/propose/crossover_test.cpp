// The offline proposer's crossover, through its public interface: a two-parent request in,
// program text out.
#include <gtest/gtest.h>

#include <random>
#include <set>
#include <string>

#include "optiflow/propose/proposer.hpp"
#include "optiflow/topology/generators.hpp"
#include "proposals.hpp"

namespace optiflow::propose {
namespace {

using testing::canonical;
using testing::child_of;
using testing::request;

constexpr std::uint64_t kSeeds = 64;

// Parents whose statements are all different, so that each child shows where its lines came
// from. A has three statements after its setting, B two.
const std::string kA = "pipeline 4\nring over all\ndirect over hosts\nbruck over rails\n";
const std::string kB = "channels 8\nrd over rails\nbinomial over hosts\n";

// The proposer's dice: std::mt19937_64 seeded with the request's seed, an n-way choice being
// the next draw modulo n (no standard-library distribution, so every platform makes the same
// programs). Crossover draws first: under 50 of 100 halves the parents (when both have steps);
// otherwise a split weights A by 1 + (a draw mod 3) against B's 1. Then under 50 of 100
// returns the child as it is, without mutating it.
struct Expected {
  std::string child;    // the crossover's program
  bool mutated = true;  // whether the proposer goes on to mutate it
};

// What crossing kA with kB makes; with `b_steps` empty, kA with B's settings only.
Expected crossover_of(std::uint64_t seed,
                      const std::string& b_steps = "rd over rails; binomial over hosts") {
  std::mt19937_64 dice(seed);
  Expected e;
  if (dice() % 100 < 50 && !b_steps.empty()) {
    // A's setting, the first half of A's steps (rounded up), the second half of B's.
    e.child = canonical("pipeline 4\nring over all\ndirect over hosts\nbinomial over hosts\n");
  } else {
    const std::string weight = std::to_string(1 + dice() % 3);
    e.child = canonical("pipeline 4\nsplit {\n  weight " + weight +
                        " { ring over all; direct over hosts; bruck over rails }\n"
                        "  weight 1 { " +
                        b_steps + " }\n}\n");
  }
  e.mutated = dice() % 100 >= 50;
  return e;
}

class Crossover : public ::testing::Test {
 protected:
  std::string child(const std::string& a, const std::string& b, std::uint64_t seed) {
    return child_of(*proposer_, request({a, b}, seed));
  }

  topology::Topology topo_ = topology::make_a100(2);
  std::unique_ptr<Proposer> proposer_ = [this] {
    ProposalContext context;
    context.topology = &topo_;
    return make_offline_proposer(context);
  }();
};

TEST_F(Crossover, AChildIsHalfOfEachParentOrBothSideBySide) {
  std::set<std::string> unmutated;
  for (std::uint64_t seed = 0; seed < kSeeds; ++seed) {
    const Expected expected = crossover_of(seed);
    const std::string made = child(kA, kB, seed);
    if (!expected.mutated) {
      EXPECT_EQ(made, expected.child) << "seed " << seed;
      unmutated.insert(made);
    }
    EXPECT_NO_THROW(dsl::parse_program(made, "child")) << made;
  }
  // The seeds cover the halving and the split with each of its three weights.
  EXPECT_EQ(unmutated.size(), 4u);
}

// The child's settings are the first parent's: B's `channels 8` is a value no mutation makes.
TEST_F(Crossover, OnlyTheFirstParentsSettingsAreKept) {
  for (std::uint64_t seed = 0; seed < kSeeds; ++seed) {
    const std::string made = child(kA, kB, seed);
    EXPECT_EQ(made.find("channels 8"), std::string::npos) << "seed " << seed << ":\n" << made;
    EXPECT_NE(made.find("pipeline"), std::string::npos) << "seed " << seed << ":\n" << made;
  }
}

// A parent without steps cannot give half of them: both go side by side, B's branch empty.
TEST_F(Crossover, AParentOfSettingsOnlyIsSplitNotHalved) {
  int unmutated = 0;
  for (std::uint64_t seed = 0; seed < kSeeds; ++seed) {
    const Expected expected = crossover_of(seed, "");
    if (expected.mutated) continue;
    EXPECT_EQ(child(kA, "channels 2\n", seed), expected.child) << "seed " << seed;
    ++unmutated;
  }
  EXPECT_GT(unmutated, 0);
}

TEST_F(Crossover, TheParentsOrderMatters) {
  int same = 0;
  for (std::uint64_t seed = 0; seed < kSeeds; ++seed)
    same += child(kA, kB, seed) == child(kB, kA, seed);
  EXPECT_EQ(same, 0);
}

}  // namespace
}  // namespace optiflow::propose
