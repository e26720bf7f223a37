// The run in the store: begun, or reopened to resume it; each candidate committed in sequence
// order, and a resumed run's candidates checked against what it committed before.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "candidate.hpp"
#include "optiflow/db/store.hpp"
#include "optiflow/explore/explore.hpp"
#include "optiflow/topology/topology.hpp"

namespace optiflow::explore {

class RunRecord {
 public:
  /// Opens the store. With options.resume, reads that run and puts its own topology,
  /// collective, sizes, budget, seed and proposer into `options`; throws InputError when the
  /// store has no such run.
  explicit RunRecord(ExploreOptions& options);

  /// Stores the topology and begins the run, or marks the resumed run as running again.
  void begin(const ExploreOptions& options, const topology::Topology& topology);
  std::int64_t id() const { return run_id_; }

  /// Commits an evaluated candidate (with its schedule when `keep_schedule`) and returns its
  /// program's id. A candidate that a resumed run committed before is checked, not stored.
  std::int64_t commit(const Candidate& c, support::Collective collective, bool keep_schedule);
  /// "finished", "interrupted" or "failed".
  void end(const std::string& status);

 private:
  void resume(ExploreOptions& options);
  std::int64_t check_committed(const Candidate& c) const;

  db::Store store_;
  std::string db_path_;
  std::int64_t run_id_ = 0;
  std::vector<db::StoredCandidate> committed_;  ///< a resumed run's, in seq order
};

}  // namespace optiflow::explore
