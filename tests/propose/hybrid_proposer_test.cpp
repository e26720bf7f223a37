// The hybrid proposer: which of its two members answers each request, each repair, and when it
// stops, with members that record what they were asked.
#include <gtest/gtest.h>

#include <memory>
#include <optional>
#include <span>
#include <string>
#include <vector>

#include "optiflow/propose/proposer.hpp"

namespace optiflow::propose {
namespace {

// A member that answers each request with `per_request` programs named after itself and the
// request's seed ("a:7", "a:7+1", ...), and records the seeds it was given.
class Member final : public Proposer {
 public:
  Member(std::string name, std::size_t per_request) : name_(std::move(name)), per_(per_request) {}

  std::string name() const override { return name_; }
  std::vector<Proposal> initial_programs() override {
    return {{name_ + ":initial0", name_}, {name_ + ":initial1", name_}};
  }
  std::vector<std::vector<Proposal>> propose(std::span<const ProposalRequest> requests) override {
    std::vector<std::vector<Proposal>> out;
    for (const ProposalRequest& r : requests) {
      seeds.push_back(r.seed);
      std::vector<Proposal> programs;
      for (std::size_t k = 0; k < per_; ++k)
        programs.push_back({label(r.seed) + (k ? "+" + std::to_string(k) : ""), name_});
      out.push_back(std::move(programs));
    }
    ++calls;
    return out;
  }
  std::size_t proposals_per_request() const override { return per_; }
  std::vector<std::optional<Proposal>> repair(std::span<const Rejection> rejected) override {
    std::vector<std::optional<Proposal>> out;
    for (const Rejection& r : rejected)
      out.push_back(Proposal{r.proposal.source + " repaired by " + name_, name_});
    return out;
  }
  std::string stop_reason() const override { return stop; }

  std::string label(std::uint64_t seed) const { return name_ + ":" + std::to_string(seed); }

  std::vector<std::uint64_t> seeds;
  int calls = 0;
  std::string stop;

 private:
  std::string name_;
  std::size_t per_;
};

class Hybrid : public ::testing::Test {
 protected:
  Hybrid() {
    auto a = std::make_unique<Member>("a", 1);
    auto b = std::make_unique<Member>("b", 1);
    a_ = a.get();
    b_ = b.get();
    hybrid_ = make_hybrid_proposer(std::move(a), std::move(b));
  }

  // Requests with seeds first, first + 1, ...
  static std::vector<ProposalRequest> requests(std::size_t n, std::uint64_t first = 0) {
    std::vector<ProposalRequest> out(n);
    for (std::size_t i = 0; i < n; ++i) {
      out[i].parents.resize(1);
      out[i].seed = first + i;
    }
    return out;
  }

  // The first program answering each request.
  std::vector<std::string> sources(std::size_t n, std::uint64_t first = 0) {
    std::vector<std::string> out;
    for (const auto& programs : hybrid_->propose(requests(n, first))) {
      EXPECT_EQ(programs.size(), 1u);
      out.push_back(programs.empty() ? "" : programs[0].source);
    }
    return out;
  }

  Member* a_ = nullptr;
  Member* b_ = nullptr;
  std::unique_ptr<Proposer> hybrid_;
};

TEST_F(Hybrid, RequestsAlternateFirstMemberFirstAndAnswersKeepTheRequestsOrder) {
  EXPECT_EQ(sources(5), (std::vector<std::string>{"a:0", "b:1", "a:2", "b:3", "a:4"}));
  // Each member gets its share in one call, in request order.
  EXPECT_EQ(a_->seeds, (std::vector<std::uint64_t>{0, 2, 4}));
  EXPECT_EQ(b_->seeds, (std::vector<std::uint64_t>{1, 3}));
  EXPECT_EQ(a_->calls, 1);
  EXPECT_EQ(b_->calls, 1);
}

// The alternation restarts with each call: a batch of one request always goes to the first.
TEST_F(Hybrid, EachCallStartsWithTheFirstMember) {
  EXPECT_EQ(sources(1, 10), (std::vector<std::string>{"a:10"}));
  EXPECT_EQ(sources(1, 11), (std::vector<std::string>{"a:11"}));
  EXPECT_EQ(sources(2, 12), (std::vector<std::string>{"a:12", "b:13"}));
  EXPECT_EQ(b_->seeds, (std::vector<std::uint64_t>{13}));
  EXPECT_EQ(b_->calls, 1);
}

TEST_F(Hybrid, AStoppedMemberHandsItsShareToTheOther) {
  a_->stop = "token budget spent";
  EXPECT_EQ(sources(3), (std::vector<std::string>{"b:0", "b:1", "b:2"}));
  EXPECT_EQ(a_->calls, 0);
  EXPECT_EQ(hybrid_->stop_reason(), "");
  a_->stop.clear();
  b_->stop = "cost budget spent";
  EXPECT_EQ(sources(3), (std::vector<std::string>{"a:0", "a:1", "a:2"}));
  EXPECT_EQ(hybrid_->stop_reason(), "");
  a_->stop = "token budget spent";
  EXPECT_EQ(hybrid_->stop_reason(), "token budget spent; cost budget spent");
}

TEST_F(Hybrid, InitialProgramsAreTheFirstMembersThenTheSeconds) {
  std::vector<std::string> initial;
  for (const Proposal& p : hybrid_->initial_programs()) initial.push_back(p.source);
  EXPECT_EQ(initial,
            (std::vector<std::string>{"a:initial0", "a:initial1", "b:initial0", "b:initial1"}));
}

// Each rejected proposal goes back to the member its origin names; other origins get none.
TEST_F(Hybrid, RepairsGoToTheMemberThatMadeTheProposal) {
  const std::vector<Rejection> rejected{
      {{"p0", "b"}, "e0"}, {{"p1", "a"}, "e1"}, {{"p2", "template"}, "e2"}, {{"p3", "b"}, "e3"}};
  const auto repaired = hybrid_->repair(rejected);
  ASSERT_EQ(repaired.size(), 4u);
  EXPECT_EQ(repaired[0]->source, "p0 repaired by b");
  EXPECT_EQ(repaired[1]->source, "p1 repaired by a");
  EXPECT_FALSE(repaired[2].has_value());
  EXPECT_EQ(repaired[3]->source, "p3 repaired by b");
  EXPECT_EQ(repaired[3]->origin, "b");
}

// Explore sizes its requests by the mean of the members' yields, rounded up.
TEST(HybridSizes, AMembersSeveralProgramsPerRequestStayWithTheirRequest) {
  auto a = std::make_unique<Member>("a", 1);
  auto b = std::make_unique<Member>("b", 4);
  const std::unique_ptr<Proposer> hybrid = make_hybrid_proposer(std::move(a), std::move(b));
  EXPECT_EQ(hybrid->proposals_per_request(), 3u);
  EXPECT_EQ(hybrid->name(), "hybrid");
  std::vector<ProposalRequest> requests(3);
  for (std::size_t i = 0; i < requests.size(); ++i) requests[i].seed = i;
  const auto answers = hybrid->propose(requests);
  ASSERT_EQ(answers.size(), 3u);
  EXPECT_EQ(answers[0].size(), 1u);
  ASSERT_EQ(answers[1].size(), 4u);
  EXPECT_EQ(answers[1][0].source, "b:1");
  EXPECT_EQ(answers[1][3].source, "b:1+3");
  EXPECT_EQ(answers[2][0].source, "a:2");
}

}  // namespace
}  // namespace optiflow::propose
