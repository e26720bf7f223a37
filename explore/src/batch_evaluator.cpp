// Parsing is serial (cheap, and it finds repeats in sequence order); compiling and simulating
// run in parallel, each candidate on its own, so the results never depend on the thread count.
#include "batch_evaluator.hpp"

#include <stdexcept>

#include "optiflow/support/parallel.hpp"
#include "remote_evaluators.hpp"

namespace optiflow::explore {

const CandidateCache::Known* CandidateCache::find_or_claim_program(const std::string& canonical) {
  const auto [it, claimed] = programs_.try_emplace(canonical);
  return claimed ? nullptr : &it->second;
}

void CandidateCache::remember_program(const std::string& canonical, Known known) {
  programs_[canonical] = std::move(known);
}

const Simulated* CandidateCache::find_schedule(const std::string& schedule_hash) const {
  const auto it = schedules_.find(schedule_hash);
  return it == schedules_.end() ? nullptr : &it->second;
}

void CandidateCache::remember_schedule(const std::string& schedule_hash,
                                       const Simulated& simulated) {
  schedules_.try_emplace(schedule_hash, simulated);
}

const CandidateCache::Known& CandidateCache::program(const std::string& canonical) const {
  return programs_.at(canonical);
}

BatchEvaluator::BatchEvaluator(const topology::Topology& topology, support::Collective collective,
                               const Reference& reference, unsigned threads)
    : topology_(topology), collective_(collective), reference_(reference), threads_(threads) {}

// Each new program is compiled, simulated and, unless it is kept, dropped in one task: a batch
// of thousand-GPU schedules (a gigabyte each) would not fit in memory at once.
void BatchEvaluator::evaluate(std::vector<Candidate>& batch) {
  const std::vector<std::size_t> fresh = parse_and_find_repeats(batch);
  const std::optional<std::vector<double>> best = winner_times_ ? winner_times_() : std::nullopt;
  if (remote_)
    evaluate_remotely(batch, fresh, best);
  else
    support::parallel_for(fresh.size(), threads_,
                          [&](std::size_t k) { compile_and_simulate(batch[fresh[k]], best); });
  for (std::size_t i : fresh) {
    Candidate& c = batch[i];
    if (c.compiled.ok) cache_.remember_schedule(c.compiled.schedule_hash, c.simulated);
    cache_.remember_program(c.parsed.canonical, {c.compiled.light(), c.simulated});
  }
  for (Candidate& c : batch)
    if (c.reused) {
      const CandidateCache::Known& known = cache_.program(c.parsed.canonical);
      c.compiled = known.compiled;
      c.simulated = known.simulated;
    }
}

// The indices of the candidates whose programs are new; the others are marked reused.
std::vector<std::size_t> BatchEvaluator::parse_and_find_repeats(std::vector<Candidate>& batch) {
  std::vector<std::size_t> fresh;
  for (std::size_t i = 0; i < batch.size(); ++i) {
    Candidate& c = batch[i];
    c.parsed = parse_candidate(c.source);
    if (c.parsed.canonical.empty()) continue;
    if (cache_.find_or_claim_program(c.parsed.canonical))
      c.reused = true;
    else
      fresh.push_back(i);
  }
  return fresh;
}

// A new program may compile to a schedule simulated in an earlier batch: it costs no
// simulation. (Two of one batch are both simulated; the cache is only read while tasks run.)
namespace {

// Whether `c` is faster than `best` at some size (a time of 0: no winner there yet).
bool beats_somewhere(const Candidate& c, const std::vector<double>& best) {
  for (std::size_t s = 0; s < best.size() && s < c.simulated.results.size(); ++s)
    if (best[s] == 0 || c.simulated.results[s].time_us < best[s]) return true;
  return false;
}

}  // namespace

void BatchEvaluator::compile_and_simulate(Candidate& c,
                                          const std::optional<std::vector<double>>& best) const {
  c.compiled = compile_candidate(c.parsed, topology_, collective_);
  c.parsed.program.reset();
  if (!c.compiled.ok) return;
  if (const Simulated* known = cache_.find_schedule(c.compiled.schedule_hash))
    c.simulated = *known;
  else
    c.simulated = simulate_candidate(c.compiled.schedule, topology_, reference_);
  if (best && !beats_somewhere(c, *best)) c.compiled.schedule = {};
}

// Results come back without schedules: a winner's is compiled again here, and must be the
// schedule the other process simulated. Here every result of the batch is known, so only the
// candidates that will win when committed in order are compiled again.
void BatchEvaluator::evaluate_remotely(std::vector<Candidate>& batch,
                                       const std::vector<std::size_t>& fresh,
                                       const std::optional<std::vector<double>>& best) {
  std::vector<Candidate*> todo;
  for (std::size_t i : fresh) todo.push_back(&batch[i]);
  remote_->evaluate(todo, [&](Candidate& c) { compile_and_simulate(c, best); });
  std::optional<std::vector<double>> running = best;
  std::vector<Candidate*> kept;
  for (Candidate* c : todo) {
    if (!c->compiled.ok) continue;
    if (running) {
      if (!beats_somewhere(*c, *running)) continue;
      for (std::size_t s = 0; s < running->size() && s < c->simulated.results.size(); ++s) {
        double& time = (*running)[s];
        const double candidate = c->simulated.results[s].time_us;
        if (time == 0 || candidate < time) time = candidate;
      }
    }
    if (c->parsed.program) kept.push_back(c);  // evaluated elsewhere
  }
  support::parallel_for(kept.size(), threads_, [&](std::size_t k) {
    Candidate& c = *kept[k];
    Compiled here = compile_candidate(c.parsed, topology_, collective_);
    if (here.schedule_hash != c.compiled.schedule_hash)
      throw std::runtime_error("explore --distributed: candidate " + std::to_string(c.seq) +
                               " compiled to schedule " + here.schedule_hash + " here but to " +
                               c.compiled.schedule_hash + " elsewhere");
    c.compiled.schedule = std::move(here.schedule);
  });
  for (Candidate* c : todo) c->parsed.program.reset();
}

}  // namespace optiflow::explore
