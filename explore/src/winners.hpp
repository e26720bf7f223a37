// The best schedule per size so far, what proposers are shown of it, and at the end of a run
// its files (schedule JSON and MSCCL XML) and its time in the flow model.
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "candidate.hpp"
#include "optiflow/explore/explore.hpp"
#include "optiflow/explore/sweep.hpp"
#include "optiflow/schedule/schedule.hpp"

namespace optiflow::explore {

class Winners {
 public:
  /// `reference` is referenced: it must outlive this.
  explicit Winners(const Reference& reference);

  /// Whether the candidate (with its measured times, or null) becomes the winner at some size.
  bool improves_some_size(const Candidate& c, const std::vector<double>* hw) const;
  /// Each size's winning simulated time (0: none yet), what a simulated candidate must beat.
  std::vector<double> simulated_times() const;
  /// Makes the candidate the winner at every size where it beats the winner so far; a winner
  /// keeps its schedule (moved out of the candidate, the last to need it).
  void record(Candidate& c, std::int64_t program_id, const propose::Parent& parent,
              const std::vector<double>* hw);
  /// Makes a baseline's schedule the winner at every size where it beats the winner so far
  /// (`results`: one per size of the reference, time 0 where the schedule does not stand for
  /// the baseline). Programs then have to beat it.
  void offer_baseline(const std::string& name, std::shared_ptr<const schedule::Schedule> schedule,
                      const std::vector<support::SizeResult>& results);
  /// The distinct programs that win at some size, smallest size first (at most three).
  std::vector<propose::Parent> best_programs() const;
  /// Per size: the winner's busbw and time / bound; 0 where there is none yet.
  void fill(Progress& progress) const;
  /// The winners, with their files written under `out_dir` and their flow-model busbw.
  std::vector<SizeWinner> write(const std::string& out_dir, const topology::Topology& topology,
                                support::Collective collective) const;

 private:
  struct Best {
    support::SizeResult simulated;  ///< time 0: no winner yet
    std::int64_t program_id = 0;
    propose::Parent parent;  ///< its source and results, as proposers see them
    std::shared_ptr<const schedule::Schedule> schedule;
    double measured_us = 0;  ///< --hw: its measured time; 0 = not measured
    std::string baseline;    ///< a baseline of the floor holds this size (program_id 0)
  };

  bool beats(std::size_t s, const Candidate& c, const std::vector<double>* hw) const;
  SizeWinner winner_at(std::size_t s) const;

  const Reference& reference_;
  std::vector<Best> best_;  ///< per size
};

}  // namespace optiflow::explore
