// Two proposers in one run (`--proposer hybrid`: the model and the offline proposer).
#include <algorithm>

#include "optiflow/propose/proposer.hpp"

namespace optiflow::propose {
namespace {

class HybridProposer final : public Proposer {
 public:
  HybridProposer(std::unique_ptr<Proposer> first, std::unique_ptr<Proposer> second)
      : members_{std::move(first), std::move(second)} {}

  std::string name() const override { return "hybrid"; }

  std::vector<Proposal> initial_programs() override {
    std::vector<Proposal> all = members_[0]->initial_programs();
    for (Proposal& p : members_[1]->initial_programs()) all.push_back(std::move(p));
    return all;
  }

  // Even requests to the first member, odd ones to the second; a member that has stopped
  // hands its share to the other.
  std::vector<std::vector<Proposal>> propose(std::span<const ProposalRequest> requests) override {
    std::vector<ProposalRequest> shares[2];
    std::vector<std::size_t> member_of(requests.size());
    const bool stopped[2] = {!members_[0]->stop_reason().empty(),
                             !members_[1]->stop_reason().empty()};
    for (std::size_t i = 0; i < requests.size(); ++i) {
      std::size_t m = i % 2;
      if (stopped[m]) m = 1 - m;
      member_of[i] = m;
      shares[m].push_back(requests[i]);
    }
    std::vector<std::vector<Proposal>> answers[2];
    for (std::size_t m = 0; m < 2; ++m)
      if (!shares[m].empty()) answers[m] = members_[m]->propose(shares[m]);
    std::vector<std::vector<Proposal>> proposals(requests.size());
    std::size_t next[2] = {0, 0};
    for (std::size_t i = 0; i < requests.size(); ++i)
      proposals[i] = std::move(answers[member_of[i]][next[member_of[i]]++]);
    return proposals;
  }

  std::size_t proposals_per_request() const override {
    return (members_[0]->proposals_per_request() + members_[1]->proposals_per_request() + 1) / 2;
  }

  std::vector<std::optional<Proposal>> repair(std::span<const Rejection> rejected) override {
    std::vector<std::optional<Proposal>> repaired(rejected.size());
    for (const auto& member : members_) {
      std::vector<Rejection> mine;
      std::vector<std::size_t> where;
      for (std::size_t i = 0; i < rejected.size(); ++i)
        if (rejected[i].proposal.origin == member->name()) {
          mine.push_back(rejected[i]);
          where.push_back(i);
        }
      if (mine.empty()) continue;
      auto answers = member->repair(mine);
      for (std::size_t k = 0; k < where.size(); ++k) repaired[where[k]] = std::move(answers[k]);
    }
    return repaired;
  }

  std::string stop_reason() const override {
    const std::string a = members_[0]->stop_reason(), b = members_[1]->stop_reason();
    return a.empty() || b.empty() ? std::string() : a + "; " + b;
  }

 private:
  std::unique_ptr<Proposer> members_[2];
};

}  // namespace

std::unique_ptr<Proposer> make_hybrid_proposer(std::unique_ptr<Proposer> first,
                                               std::unique_ptr<Proposer> second) {
  return std::make_unique<HybridProposer>(std::move(first), std::move(second));
}

}  // namespace optiflow::propose
