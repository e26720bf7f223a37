// Evaluates a batch of candidates: parse, compile (which verifies) and simulate, on all cores,
// remembering what it has seen so that no program is compiled twice and no schedule of an
// earlier batch simulated again.
// It needs nothing of a run but its topology, collective and sizes, so any process can run it.
#pragma once

#include <functional>
#include <map>
#include <optional>
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
  const Known& program(const std::string& canonical) const;
  /// The schedule's simulation, or null when none is remembered.
  const Simulated* find_schedule(const std::string& schedule_hash) const;
  void remember_schedule(const std::string& schedule_hash, const Simulated& simulated);

 private:
  std::map<std::string, Known> programs_;       // by canonical program
  std::map<std::string, Simulated> schedules_;  // by schedule hash
};

class RemoteEvaluators;

class BatchEvaluator {
 public:
  /// `topology` and `reference` are referenced: they must outlive the evaluator. `threads`:
  /// 0 = all cores; results do not depend on it.
  BatchEvaluator(const topology::Topology& topology, support::Collective collective,
                 const Reference& reference, unsigned threads);

  /// The winners' simulated time per size before a batch (0: none), or nullopt where every
  /// schedule must be kept (measurements need them). A candidate that beats neither them nor
  /// an earlier candidate of its batch at any size cannot become a winner: its schedule is
  /// dropped once it is simulated. Unset: every schedule is kept.
  using WinnerTimes = std::function<std::optional<std::vector<double>>()>;
  void keep_schedules_of_winners(WinnerTimes times) { winner_times_ = std::move(times); }
  /// Spreads the new programs of each batch over other processes too; null: this one only.
  void use_remote(RemoteEvaluators* remote) { remote_ = remote; }

  /// Fills each candidate's parsed, compiled and simulated results, in place; a candidate
  /// whose program was evaluated before is marked `reused` and costs nothing.
  void evaluate(std::vector<Candidate>& batch);

 private:
  std::vector<std::size_t> parse_and_find_repeats(std::vector<Candidate>& batch);
  void compile_and_simulate(Candidate& c, const std::optional<std::vector<double>>& best) const;
  void evaluate_remotely(std::vector<Candidate>& batch, const std::vector<std::size_t>& fresh,
                         const std::optional<std::vector<double>>& best);

  const topology::Topology& topology_;
  support::Collective collective_;
  const Reference& reference_;
  unsigned threads_;
  WinnerTimes winner_times_;
  RemoteEvaluators* remote_ = nullptr;
  CandidateCache cache_;
};

}  // namespace optiflow::explore
