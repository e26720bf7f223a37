// Parsing is serial (cheap, and it finds repeats in sequence order); compiling and simulating
// run in parallel, each candidate on its own, so the results never depend on the thread count.
#include "batch_evaluator.hpp"

#include "optiflow/support/parallel.hpp"

namespace optiflow::explore {

const CandidateCache::Known* CandidateCache::find_or_claim_program(const std::string& canonical) {
  const auto [it, claimed] = programs_.try_emplace(canonical);
  return claimed ? nullptr : &it->second;
}

void CandidateCache::remember_program(const std::string& canonical, Known known) {
  programs_[canonical] = std::move(known);
}

const Simulated* CandidateCache::find_or_claim_schedule(const std::string& schedule_hash) {
  const auto [it, claimed] = schedules_.try_emplace(schedule_hash);
  return claimed ? nullptr : &it->second;
}

void CandidateCache::remember_schedule(const std::string& schedule_hash,
                                       const Simulated& simulated) {
  schedules_[schedule_hash] = simulated;
}

const CandidateCache::Known& CandidateCache::program(const std::string& canonical) const {
  return programs_.at(canonical);
}

const Simulated& CandidateCache::schedule(const std::string& schedule_hash) const {
  return schedules_.at(schedule_hash);
}

BatchEvaluator::BatchEvaluator(const topology::Topology& topology, support::Collective collective,
                               const Reference& reference, unsigned threads)
    : topology_(topology), collective_(collective), reference_(reference), threads_(threads) {}

void BatchEvaluator::evaluate(std::vector<Candidate>& batch) {
  const std::vector<std::size_t> fresh = parse_and_find_repeats(batch);
  compile(batch, fresh);
  simulate(batch, fresh);
  for (std::size_t i : fresh)
    cache_.remember_program(batch[i].parsed.canonical,
                            {batch[i].compiled.light(), batch[i].simulated});
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

void BatchEvaluator::compile(std::vector<Candidate>& batch, const std::vector<std::size_t>& fresh) {
  support::parallel_for(fresh.size(), threads_, [&](std::size_t k) {
    Candidate& c = batch[fresh[k]];
    c.compiled = compile_candidate(c.parsed, topology_, collective_);
    c.parsed.program.reset();
  });
}

// A new program may compile to a schedule simulated before: it costs no simulation.
void BatchEvaluator::simulate(std::vector<Candidate>& batch,
                              const std::vector<std::size_t>& fresh) {
  std::vector<std::size_t> to_simulate, repeats;
  for (std::size_t i : fresh) {
    Candidate& c = batch[i];
    if (!c.compiled.ok) continue;
    if (cache_.find_or_claim_schedule(c.compiled.schedule_hash))
      repeats.push_back(i);  // its simulation may still be on its way, earlier in this batch
    else
      to_simulate.push_back(i);
  }
  support::parallel_for(to_simulate.size(), threads_, [&](std::size_t k) {
    Candidate& c = batch[to_simulate[k]];
    c.simulated = simulate_candidate(c.compiled.schedule, topology_, reference_);
  });
  for (std::size_t i : to_simulate)
    cache_.remember_schedule(batch[i].compiled.schedule_hash, batch[i].simulated);
  for (std::size_t i : repeats)
    batch[i].simulated = cache_.schedule(batch[i].compiled.schedule_hash);
}

}  // namespace optiflow::explore
