// Exploration spread over the ranks of an MPI job (mpirun, srun): rank 0 owns the database, the
// proposer and the selection and evaluates too; every other rank compiles, verifies and
// simulates the candidates rank 0 sends it. Candidates are dealt one at a time to whichever rank
// is free, and results are taken in sequence order, so the same seed and budget give the same
// winners as one process (docs/cluster.md).
#pragma once

#include <memory>
#include <optional>

#include "optiflow/explore/explore.hpp"

namespace optiflow::explore {

struct DistributedOptions {
  /// A rank that holds one candidate longer than this is given up: reported, and its candidate
  /// evaluated elsewhere. Compiling one is capped at a minute (CandidateBudget).
  double rank_timeout_s = 300;
};

/// One process's part of a distributed exploration. Starts MPI (once per process); the
/// destructor ends it, with MPI_Abort where a rank was given up (it could never join the end).
class DistributedJob {
 public:
  DistributedJob();
  ~DistributedJob();
  DistributedJob(const DistributedJob&) = delete;
  DistributedJob& operator=(const DistributedJob&) = delete;

  int rank() const;
  int size() const;

  /// On rank 0: explore() with every rank evaluating, and its result. On the others: serves
  /// evaluations until rank 0 is done, then nullopt. Every rank must be given the same
  /// options; with one rank it is explore(). Rank 0's failures are thrown there as explore()
  /// throws them, after the other ranks are told to stop.
  std::optional<ExploreResult> explore(const ExploreOptions& options,
                                       const propose::ProposerFactory& make_proposer,
                                       const ProgressSink& progress,
                                       const DistributedOptions& distributed = {});

 private:
  struct State;
  std::unique_ptr<State> state_;
};

}  // namespace optiflow::explore
