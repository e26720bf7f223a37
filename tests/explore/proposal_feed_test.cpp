// The proposal feed with a scripted proposer: requests seeded per sequence number and spread
// over the islands, candidates numbered in order, one repair per failure, and a proposer that
// makes nothing ending the run.
#include "proposal_feed.hpp"

#include <gtest/gtest.h>

#include <set>
#include <string>
#include <vector>

#include "optiflow/topology/generators.hpp"

namespace optiflow::explore {
namespace {

// Answers every request with one program; repairs by appending " all" to the program.
class ScriptedProposer : public propose::Proposer {
 public:
  std::string name() const override { return "scripted"; }
  std::vector<propose::Proposal> initial_programs() override {
    return {{"ring over all\n", "template", 0}, {"ring over\n", "template", 0}};
  }
  std::vector<std::vector<propose::Proposal>> propose(
      std::span<const propose::ProposalRequest> requests) override {
    std::vector<std::vector<propose::Proposal>> answers;
    for (const propose::ProposalRequest& r : requests) {
      seeds.push_back(r.seed);
      parents.push_back(r.parents.front().source);
      if (silent) {
        answers.emplace_back();
        continue;
      }
      answers.push_back({{"rd over all\n", "scripted", 0}});
    }
    return answers;
  }
  std::vector<std::optional<propose::Proposal>> repair(
      std::span<const propose::Rejection> rejected) override {
    std::vector<std::optional<propose::Proposal>> repaired;
    for (const propose::Rejection& r : rejected) {
      diagnostics.push_back(r.diagnostics);
      repaired.push_back(propose::Proposal{"ring over all\n", "repaired", 0});
    }
    return repaired;
  }

  bool silent = false;
  std::vector<std::uint64_t> seeds;
  std::vector<std::string> parents, diagnostics;
};

class ProposalFeedTest : public ::testing::Test {
 protected:
  const topology::Topology topo_ = topology::make_ring(4);
  const Reference reference_ =
      Reference::compute(topo_, support::Collective::all_gather, {1024, 1 << 20});
  ScriptedProposer proposer_;
  ProgramDatabase population_{2, 2, 4};
  Winners winners_{reference_};
  ProposalFeed feed_{proposer_, population_, winners_, topo_, 5};
};

TEST_F(ProposalFeedTest, TemplatesComeFirstThenOneRequestPerProposalNumberedInOrder) {
  feed_.queue_initial();
  std::vector<Candidate> batch;
  std::int64_t seq = 0;
  feed_.fill(batch, seq, 6, 0);
  ASSERT_EQ(batch.size(), 6u);
  EXPECT_EQ(seq, 6);
  EXPECT_EQ(batch[0].origin, "template");
  EXPECT_EQ(batch[0].island, -1);  // a template is offered to every island
  EXPECT_EQ(batch[2].origin, "scripted");
  for (std::size_t i = 0; i < batch.size(); ++i) EXPECT_EQ(batch[i].seq, static_cast<int>(i));
  // Once the templates ran out, the feed asked for the rest of the batch at once: 14 requests
  // for seq 2..15, on islands 0 1 0 1 ..., each with its own seed, and with NCCL's ring as the
  // parent while the population is empty. Four of the answers are in this batch.
  EXPECT_EQ(batch[2].island, 0);
  EXPECT_EQ(batch[3].island, 1);
  ASSERT_EQ(proposer_.seeds.size(), ProposalFeed::kBatch - 2);
  EXPECT_EQ(std::set<std::uint64_t>(proposer_.seeds.begin(), proposer_.seeds.end()).size(),
            ProposalFeed::kBatch - 2);
  EXPECT_EQ(proposer_.parents[0], "ring over all\n");
  // The next batch takes the queued answers before asking again.
  std::vector<Candidate> next;
  feed_.fill(next, seq, 16, 1);
  EXPECT_EQ(next.size(), 10u);
  EXPECT_EQ(next.front().seq, 6);
  EXPECT_EQ(next.front().iteration, 1);
  EXPECT_EQ(proposer_.seeds.size(), ProposalFeed::kBatch - 2);
}

TEST_F(ProposalFeedTest, TheSameSeedMakesTheSameRequests) {
  ScriptedProposer other;
  ProposalFeed again(other, population_, winners_, topo_, 5);
  std::vector<Candidate> a, b;
  std::int64_t seq_a = 0, seq_b = 0;
  feed_.fill(a, seq_a, 3, 0);
  again.fill(b, seq_b, 3, 0);
  EXPECT_EQ(proposer_.seeds, other.seeds);
}

TEST_F(ProposalFeedTest, AFailedCandidateIsRepairedOnceInItsPlace) {
  feed_.queue_initial();
  std::vector<Candidate> batch;
  std::int64_t seq = 0;
  feed_.fill(batch, seq, 2, 0);
  BatchEvaluator evaluator(topo_, support::Collective::all_gather, reference_, 1);
  evaluator.evaluate(batch);
  ASSERT_FALSE(batch[1].ok());
  feed_.repair(batch, evaluator);
  ASSERT_EQ(proposer_.diagnostics.size(), 1u);
  EXPECT_NE(proposer_.diagnostics[0].find("candidate:1:"), std::string::npos);
  EXPECT_EQ(batch[1].origin, "repaired");
  EXPECT_EQ(batch[1].seq, 1);
  EXPECT_TRUE(batch[1].repaired);
  EXPECT_TRUE(batch[1].ok());
  feed_.repair(batch, evaluator);  // nothing left to repair, and no second try
  EXPECT_EQ(proposer_.diagnostics.size(), 1u);
}

TEST_F(ProposalFeedTest, AProposerThatMakesNothingEndsTheRunAfterFiveRounds) {
  proposer_.silent = true;
  std::vector<Candidate> batch;
  std::int64_t seq = 0;
  EXPECT_THROW(feed_.fill(batch, seq, 100, 0), propose::ProposerError);
  EXPECT_TRUE(batch.empty());
  EXPECT_EQ(proposer_.seeds.size(), 5u * ProposalFeed::kBatch);
}

}  // namespace
}  // namespace optiflow::explore
