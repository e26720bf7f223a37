// Evaluates a batch of candidates: parse, compile (which verifies) and simulate, on all cores,
// remembering what it has seen so that no program is compiled and no schedule simulated twice.
// It needs nothing of a run but its topology, collective and sizes, so any process can run it.
#pragma once

#include <map>
#include <string>
#include <vector>

#include "candidate.hpp"
#include "optiflow/explore/sweep.hpp"
#include "optiflow/topology/topology.hpp"

namespace optiflow::explore {

/// What a run already knows: each program's results by its canonical text, and each
/// schedule's simulation by its hash (different programs may compile to one schedule).
class CandidateCache {
 public:
  struct Known {
    Compiled compiled;  ///< without its schedule (Compiled::light)
    Simulated simulated;
  };

  /// The program's results, or null when it is new; claims a new one, so that later repeats
  /// (in the same batch) wait for its results instead of being evaluated again.
  const Known* find_or_claim_program(const std::string& canonical);
  void remember_program(const std::string& canonical, Known known);
  /// Like find_or_claim_program, for a schedule's simulation.
  const Simulated* find_or_claim_schedule(const std::string& schedule_hash);
  void remember_schedule(const std::string& schedule_hash, const Simulated& simulated);
  const Known& program(const std::string& canonical) const;
  const Simulated& schedule(const std::string& schedule_hash) const;

 private:
  std::map<std::string, Known> programs_;       // by canonical program
  std::map<std::string, Simulated> schedules_;  // by schedule hash
};

class BatchEvaluator {
 public:
  /// `topology` and `reference` are referenced: they must outlive the evaluator. `threads`:
  /// 0 = all cores; results do not depend on it.
  BatchEvaluator(const topology::Topology& topology, support::Collective collective,
                 const Reference& reference, unsigned threads);

  /// Fills each candidate's parsed, compiled and simulated results, in place; a candidate
  /// whose program was evaluated before is marked `reused` and costs nothing.
  void evaluate(std::vector<Candidate>& batch);

 private:
  std::vector<std::size_t> parse_and_find_repeats(std::vector<Candidate>& batch);
  void compile(std::vector<Candidate>& batch, const std::vector<std::size_t>& fresh);
  void simulate(std::vector<Candidate>& batch, const std::vector<std::size_t>& fresh);

  const topology::Topology& topology_;
  support::Collective collective_;
  const Reference& reference_;
  unsigned threads_;
  CandidateCache cache_;
};

}  // namespace optiflow::explore
