// Requests are seeded per sequence number, so a proposal depends only on the run's seed and
// what came before it, never on timing.
#include "proposal_feed.hpp"

#include <algorithm>

namespace optiflow::explore {
namespace {

constexpr std::size_t kKnownShown = 12;    // programs a request lists as already evaluated
constexpr std::size_t kFailuresShown = 3;  // recent failures a request carries
constexpr int kMaxEmptyRounds = 5;         // rounds without a single proposal before the run ends

std::uint64_t mix(std::uint64_t x) {  // splitmix64: independent seeds per proposal
  x += 0x9e3779b97f4a7c15ULL;
  x = (x ^ (x >> 30)) * 0xbf58476d1ce4e5b9ULL;
  x = (x ^ (x >> 27)) * 0x94d049bb133111ebULL;
  return x ^ (x >> 31);
}

// The parent of a request when the population is still empty: NCCL's rings, as a program.
std::string baseline_program(const topology::Topology& topo) {
  int hosts = 0, per_host = 0;
  for (topology::NodeId gpu : topo.gpus_by_rank()) {
    hosts = std::max(hosts, topo.node(gpu).host + 1);
    per_host = std::max(per_host, topo.node(gpu).local + 1);
  }
  if (hosts > 1 && per_host > 1)
    return "split nlocal as r {\n  ring over all by (host, (local - r) % nlocal)\n}\n";
  return "ring over all\n";
}

}  // namespace

ProposalFeed::ProposalFeed(propose::Proposer& proposer, const ProgramDatabase& population,
                           const Winners& winners, const topology::Topology& topology,
                           std::uint64_t seed)
    : proposer_(proposer),
      population_(population),
      winners_(winners),
      topology_(topology),
      seed_(seed),
      rng_(seed) {}

void ProposalFeed::queue_initial() {
  for (propose::Proposal& p : proposer_.initial_programs())
    pending_.push_back(Candidate::of(std::move(p)));
}

void ProposalFeed::fill(std::vector<Candidate>& batch, std::int64_t& seq, std::int64_t budget,
                        std::int64_t iteration) {
  while (batch.size() < kBatch && seq < budget) {
    if (pending_.empty() && !request_proposals(seq, kBatch - batch.size())) break;
    if (pending_.empty()) continue;
    Candidate c = std::move(pending_.front());
    pending_.pop_front();
    c.seq = seq++;
    c.iteration = iteration;
    batch.push_back(std::move(c));
  }
}

// Asks for about `wanted` programs, one request per proposals_per_request() of them; the
// candidates they become start at `next_seq`. False when the proposer has stopped.
bool ProposalFeed::request_proposals(std::int64_t next_seq, std::size_t wanted) {
  if (stop_reason_ = proposer_.stop_reason(); !stop_reason_.empty()) return false;
  const std::size_t per_request = std::max<std::size_t>(1, proposer_.proposals_per_request());
  std::vector<propose::ProposalRequest> requests;
  std::vector<std::pair<int, std::vector<std::int64_t>>> origins;  // island, parent ids
  for (std::size_t k = 0; k < wanted; k += per_request) {
    const auto seq = next_seq + static_cast<std::int64_t>(k);
    std::vector<std::int64_t> parent_ids;
    requests.push_back(request_for(seq, parent_ids));
    origins.emplace_back(
        static_cast<int>(static_cast<std::size_t>(seq) % population_.island_count()),
        std::move(parent_ids));
  }
  const std::size_t before = pending_.size();
  queue_answers(proposer_.propose(requests), origins);
  empty_rounds_ = pending_.size() > before ? 0 : empty_rounds_ + 1;
  if (empty_rounds_ >= kMaxEmptyRounds)
    throw propose::ProposerError("the " + proposer_.name() + " proposer made no programs in " +
                                 std::to_string(kMaxEmptyRounds) + " rounds of requests");
  return true;
}

propose::ProposalRequest ProposalFeed::request_for(std::int64_t seq,
                                                   std::vector<std::int64_t>& parent_ids) {
  const std::size_t island = static_cast<std::size_t>(seq) % population_.island_count();
  propose::ProposalRequest request;
  request.seed = mix(seed_ ^ mix(static_cast<std::uint64_t>(seq)));
  for (const Entry* p : population_.parents(island, rng_)) {
    request.parents.push_back(p->parent);
    parent_ids.push_back(p->program_id);
  }
  if (request.parents.empty())
    request.parents.push_back(propose::Parent{baseline_program(topology_), {}, {}, {}, {}, {}});
  request.best = winners_.best_programs();
  request.failures.assign(recent_failures_.begin(), recent_failures_.end());
  request.known.assign(known_.begin(), known_.end());
  return request;
}

void ProposalFeed::queue_answers(
    std::vector<std::vector<propose::Proposal>> answers,
    const std::vector<std::pair<int, std::vector<std::int64_t>>>& origins) {
  for (std::size_t r = 0; r < answers.size() && r < origins.size(); ++r)
    for (propose::Proposal& p : answers[r]) {
      Candidate c = Candidate::of(std::move(p));
      c.island = origins[r].first;
      c.parent_ids = origins[r].second;
      pending_.push_back(std::move(c));
    }
}

void ProposalFeed::repair(std::vector<Candidate>& batch, BatchEvaluator& evaluator) {
  std::vector<propose::Rejection> rejected;
  std::vector<std::size_t> where;
  for (std::size_t i = 0; i < batch.size(); ++i)
    if (!batch[i].ok() && !batch[i].repaired) {
      rejected.push_back(propose::Rejection{
          {batch[i].source, batch[i].origin, batch[i].model_call_id}, batch[i].diagnostics()});
      where.push_back(i);
    }
  if (rejected.empty()) return;
  auto repaired = proposer_.repair(rejected);
  std::vector<Candidate> second;
  std::vector<std::size_t> second_at;
  for (std::size_t k = 0; k < where.size() && k < repaired.size(); ++k) {
    if (!repaired[k]) continue;
    const Candidate& first = batch[where[k]];
    Candidate c = Candidate::of(std::move(*repaired[k]));
    c.seq = first.seq;
    c.iteration = first.iteration;
    c.island = first.island;
    c.parent_ids = first.parent_ids;
    c.repaired = true;
    second.push_back(std::move(c));
    second_at.push_back(where[k]);
  }
  if (second.empty()) return;
  evaluator.evaluate(second);
  for (std::size_t k = 0; k < second.size(); ++k) batch[second_at[k]] = std::move(second[k]);
}

void ProposalFeed::remember(const Candidate& c, const propose::Parent& parent) {
  if (!c.ok()) {
    recent_failures_.push_front(parent);
    if (recent_failures_.size() > kFailuresShown) recent_failures_.pop_back();
  }
  if (!c.reused) {
    known_.push_front(c.stored_source());
    if (known_.size() > kKnownShown) known_.pop_back();
  }
}

}  // namespace optiflow::explore
