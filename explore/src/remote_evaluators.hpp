// Other processes that evaluate candidates for this one (explore --distributed): the
// exploration stays in one process, only compiling and simulating are spread.
#pragma once

#include <functional>
#include <span>

#include "candidate.hpp"
#include "optiflow/explore/explore.hpp"
#include "optiflow/explore/sweep.hpp"
#include "optiflow/topology/topology.hpp"

namespace optiflow::explore {

class RemoteEvaluators {
 public:
  virtual ~RemoteEvaluators() = default;
  /// Tells the evaluators what they evaluate against, once, before the first batch.
  virtual void start(const topology::Topology& topology, support::Collective collective,
                     const Reference& reference) = 0;
  /// Evaluates every candidate of `todo` (parsed, new programs): each either here, by calling
  /// `here(c)`, or elsewhere, which fills c.compiled without its schedule and c.simulated.
  virtual void evaluate(std::span<Candidate* const> todo,
                        const std::function<void(Candidate&)>& here) = 0;
};

/// explore() with its new programs evaluated by `remote` (null: in this process only).
ExploreResult explore_with(const ExploreOptions& options,
                           const propose::ProposerFactory& make_proposer,
                           const ProgressSink& progress, RemoteEvaluators* remote);

}  // namespace optiflow::explore
