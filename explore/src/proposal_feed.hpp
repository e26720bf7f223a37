// Between the population and the proposer: requests built from the population's parents and
// the run's winners, failures and known programs; the answers queued as candidates in
// sequence order; failed candidates sent back once for repair.
#pragma once

#include <cstdint>
#include <deque>
#include <random>
#include <string>
#include <vector>

#include "batch_evaluator.hpp"
#include "candidate.hpp"
#include "optiflow/propose/proposer.hpp"
#include "program_database.hpp"
#include "winners.hpp"

namespace optiflow::explore {

class ProposalFeed {
 public:
  /// Proposals per batch: fixed, so that results do not depend on the number of cores.
  static constexpr std::size_t kBatch = 16;

  /// Everything is referenced and must outlive the feed; `seed` is the run's.
  ProposalFeed(propose::Proposer& proposer, const ProgramDatabase& population,
               const Winners& winners, const topology::Topology& topology, std::uint64_t seed);

  /// Queues the proposer's initial programs (its templates) before any request.
  void queue_initial();
  /// Adds candidates to `batch`, numbered from `seq` on, until it holds kBatch, the budget is
  /// reached or the proposer stops. Throws propose::ProposerError when the proposer cannot go
  /// on; what was added before stays in `batch`.
  void fill(std::vector<Candidate>& batch, std::int64_t& seq, std::int64_t budget,
            std::int64_t iteration);
  /// Each failed candidate gets one second try from its proposer (a model sees the compiler's
  /// message), evaluated in its place before it counts as failed.
  void repair(std::vector<Candidate>& batch, BatchEvaluator& evaluator);
  /// What later requests show of a committed candidate: its program, and its failure.
  void remember(const Candidate& c, const propose::Parent& parent);
  /// Why the proposer stopped (a token or cost cap); empty while it goes on.
  const std::string& stop_reason() const { return stop_reason_; }

 private:
  bool request_proposals(std::int64_t next_seq, std::size_t wanted);
  propose::ProposalRequest request_for(std::int64_t seq, std::vector<std::int64_t>& parent_ids);
  void queue_answers(std::vector<std::vector<propose::Proposal>> answers,
                     const std::vector<std::pair<int, std::vector<std::int64_t>>>& origins);

  propose::Proposer& proposer_;
  const ProgramDatabase& population_;
  const Winners& winners_;
  const topology::Topology& topology_;
  std::uint64_t seed_;
  std::mt19937_64 rng_;
  std::deque<Candidate> pending_;  ///< proposed, not yet evaluated
  std::deque<propose::Parent> recent_failures_;
  std::deque<std::string> known_;
  std::string stop_reason_;
  int empty_rounds_ = 0;
};

}  // namespace optiflow::explore
