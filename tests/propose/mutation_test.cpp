// The offline proposer's mutations, through its public interface: a one-parent request in,
// program text out.
#include <gtest/gtest.h>

#include <set>
#include <sstream>
#include <string>
#include <vector>

#include "optiflow/dsl/parser.hpp"
#include "optiflow/propose/proposer.hpp"
#include "optiflow/support/text_file.hpp"
#include "optiflow/topology/generators.hpp"
#include "proposals.hpp"

namespace optiflow::propose {
namespace {

using testing::canonical;
using testing::child_of;
using testing::request;

constexpr std::uint64_t kSeeds = 64;

class Mutation : public ::testing::Test {
 protected:
  std::unique_ptr<Proposer> fresh() const {
    ProposalContext context;
    context.topology = &topo_;
    return make_offline_proposer(context);
  }
  std::string mutant(const std::string& parent, std::uint64_t seed) {
    return child_of(*proposer_, request({parent}, seed));
  }

  topology::Topology topo_ = topology::make_a100(2);
  std::unique_ptr<Proposer> proposer_ = fresh();
};

std::string example(const std::string& name) {
  return support::read_text_file(std::string(OPTIFLOW_SOURCE_DIR) + "/datasets/programs/" + name);
}

// Explore stores proposals by their text and reruns a run from its seed: a child must parse,
// and the same request must give the same text, from this proposer or a new one.
TEST_F(Mutation, EveryChildParsesAndDependsOnlyOnTheRequest) {
  for (const char* name : {"ring.ofl", "hierarchical.ofl", "multi-ring.ofl",
                           "weighted-multipath.ofl", "tree-packing.ofl"}) {
    SCOPED_TRACE(name);
    const std::string parent = example(name);
    const std::unique_ptr<Proposer> other = fresh();
    for (std::uint64_t seed = 0; seed < kSeeds; ++seed) {
      const std::string child = mutant(parent, seed);
      EXPECT_NO_THROW(dsl::parse_program(child, "child")) << "seed " << seed << ":\n" << child;
      EXPECT_EQ(mutant(parent, seed), child) << "seed " << seed;
      EXPECT_EQ(child_of(*other, request({parent}, seed)), child) << "seed " << seed;
      EXPECT_EQ(child, canonical(child)) << "printed canonically";
    }
  }
}

// A mutation may put back what was there (the same pattern, group kind or channel count, or a
// second round undoing the first), so a few children equal their parent; the rest differ, and
// the seed picks among many.
TEST_F(Mutation, NearlyEveryChildDiffersFromItsParentAndSeedsDiffer) {
  for (const char* parent :
       {"rd over rails\ndirect over hosts\n", "pipeline 4\nchannels 2\nring over all\n",
        "scatter over [0..7]\npack over under @leaf0\n"}) {
    SCOPED_TRACE(parent);
    std::set<std::string> children;
    int unchanged = 0;
    for (std::uint64_t seed = 0; seed < kSeeds; ++seed) {
      const std::string child = mutant(parent, seed);
      unchanged += child == canonical(parent);
      children.insert(child);
    }
    EXPECT_LE(unchanged, static_cast<int>(kSeeds / 8));
    EXPECT_GE(children.size(), kSeeds / 4);
  }
}

// Every mutation of a program without steps has nothing to work on but its settings.
TEST_F(Mutation, SettingsTakeTheirValuesFromTheMutationsLists) {
  for (std::uint64_t seed = 0; seed < kSeeds; ++seed) {
    const std::string child = mutant("pipeline 4\nchannels 2\n", seed);
    const dsl::Program p = dsl::parse_program(child, "child");
    ASSERT_EQ(p.body.size(), 2u) << child;
    const std::set<std::string> allowed{"pipeline 1",  "pipeline 2", "pipeline 4", "pipeline 8",
                                        "pipeline 16", "channels 1", "channels 2", "channels 4"};
    std::istringstream lines(child);
    for (std::string line; std::getline(lines, line);) EXPECT_TRUE(allowed.count(line)) << child;
  }
}

// A parent that does not parse (a model's broken program) is mutated as a single ring.
TEST_F(Mutation, AnUnparsableParentIsMutatedAsARing) {
  for (std::uint64_t seed = 0; seed < 16; ++seed)
    EXPECT_EQ(mutant("ring over\n", seed), mutant("ring over all\n", seed)) << "seed " << seed;
}

// With the parent's busiest link named, some children send a fifth of the data on a
// breadth-first tree that avoids it; without it, none avoids anything.
TEST_F(Mutation, SomeChildrenRouteAFifthAroundTheBusiestLink) {
  const std::string parent = "pipeline 2\nring over all\n";
  ProposalRequest guided = request({parent}, 0);
  guided.parents[0].busiest_links = {{"h0.nic0", "leaf0", 0.9}};
  const std::string around = canonical(
      "pipeline 2\nsplit {\n  weight 4 { ring over all }\n  weight 1 {\n"
      "    avoid @h0.nic0 -> @leaf0\n    bfs over all\n  }\n}\n");
  int avoiding = 0, exactly = 0;
  for (std::uint64_t seed = 0; seed < kSeeds; ++seed) {
    guided.seed = seed;
    const std::string child = child_of(*proposer_, guided);
    if (child.find("avoid @h0.nic0 -> @leaf0") != std::string::npos) ++avoiding;
    exactly += child == around;
    EXPECT_EQ(mutant(parent, seed).find("avoid"), std::string::npos) << "seed " << seed;
  }
  EXPECT_GT(avoiding, 0);
  EXPECT_GT(exactly, 0) << "no child is the parent with only the avoiding branch added";
}

}  // namespace
}  // namespace optiflow::propose
