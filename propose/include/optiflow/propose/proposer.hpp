// The proposer interface: parents and their results in, DSL text out. The offline proposer
// and the language-model proposer both implement it.
#pragma once

#include <cstdint>
#include <functional>
#include <memory>
#include <optional>
#include <span>
#include <stdexcept>
#include <string>
#include <vector>

#include "optiflow/support/collective.hpp"
#include "optiflow/support/size_result.hpp"
#include "optiflow/topology/topology.hpp"

namespace optiflow::propose {

/// What NCCL's tuner picks at one size, simulated in the same cost model.
struct NcclAtSize {
  double time_us = 0;  ///< 0: the NCCL baseline does not build this collective
  std::string choice;  ///< "ring/LL128", ...
};

/// What every proposal is for.
struct ProposalContext {
  const topology::Topology* topology = nullptr;
  support::Collective collective = support::Collective::all_gather;
  std::vector<std::uint64_t> sizes;
  std::vector<double> bound_us;  ///< per size: the lower bound
  std::vector<NcclAtSize> nccl;  ///< per size; empty when there is no NCCL baseline
  std::int64_t run_id = 0;       ///< the run the proposals are for, in the store
  std::uint64_t seed = 0;        ///< the run's seed (requests carry their own)
};

/// The busiest and the idlest links of a parent at the largest size, as node ids.
struct LinkNote {
  std::string from, to;
  double utilisation = 0;
};

struct Parent {
  std::string source;
  /// How it did at each size, against the bound (measured on hardware with explore --hw);
  /// empty when it did not compile.
  std::vector<support::SizeResult> results;
  std::string diagnostics;  ///< the compiler's message when it did not compile
  std::vector<LinkNote> busiest_links, idle_links;
  /// The chain of steps that sets the time, at the smallest and the largest size, e.g.
  /// "at 1K: 15 steps through ranks 0 1 2 ...; at 1G: ...".
  std::string critical_path;
};

struct ProposalRequest {
  std::vector<Parent> parents;     ///< 1 = mutate, 2 = combine; never empty
  std::uint64_t seed = 0;          ///< the proposal must depend only on this and what follows
  std::vector<Parent> best;        ///< the run's best programs so far (fastest first)
  std::vector<Parent> failures;    ///< recent candidates that did not compile, newest first
  std::vector<std::string> known;  ///< programs already evaluated (a model should not repeat them)
};

/// A program and where it came from ("offline", "llm", ...), as the store records it.
struct Proposal {
  std::string source;
  std::string origin;
  std::int64_t model_call_id = 0;  ///< the stored model call whose reply holds it; 0: none
};

/// A proposal that did not parse, compile or verify, and the compiler's message.
struct Rejection {
  Proposal proposal;
  std::string diagnostics;
};

/// A proposer that cannot go on (a model server that keeps failing, a replay without the
/// recorded reply). Explore ends the run, keeping what it stored.
class ProposerError : public std::runtime_error {
 public:
  using std::runtime_error::runtime_error;
};

class Proposer {
 public:
  virtual ~Proposer() = default;
  virtual std::string name() const = 0;
  /// Programs to start from, in a fixed order (the template library, or a model's first ideas).
  virtual std::vector<Proposal> initial_programs() = 0;
  /// New programs for each request, in request order: any number per request (a model's reply
  /// may hold several, or none). They may be invalid: the evaluator rejects them with a
  /// diagnostic. Throws ProposerError when it cannot go on.
  virtual std::vector<std::vector<Proposal>> propose(std::span<const ProposalRequest> requests) = 0;
  /// How many programs one request usually yields (explore sizes its requests by it).
  virtual std::size_t proposals_per_request() const { return 1; }
  /// A second try for each rejected proposal (nullopt: none), made once before it counts as
  /// failed. The default makes none.
  virtual std::vector<std::optional<Proposal>> repair(std::span<const Rejection> rejected) {
    return std::vector<std::optional<Proposal>>(rejected.size());
  }
  /// Why the proposer will make no more programs (a token or cost budget is spent); empty
  /// while it can go on.
  virtual std::string stop_reason() const { return {}; }
};

/// Makes the proposer called `name` for `context`; throws support::InputError naming
/// --proposer for a name it does not know. The command line injects one into explore.
using ProposerFactory =
    std::function<std::unique_ptr<Proposer>(const std::string& name, const ProposalContext&)>;

/// The built-in proposer: parametric templates for the topology, then mutation and crossover
/// on the syntax tree, guided by the parents' results. Deterministic.
std::unique_ptr<Proposer> make_offline_proposer(const ProposalContext& context);

/// Two proposers sharing one run: requests alternate between them (the first, third, ... to
/// `first`), so that their programs meet in one population; each proposal keeps its origin.
/// Initial programs: both lists, `first`'s first. Repairs go to the proposer whose origin the
/// rejected proposal names. Stops when both have stopped.
std::unique_ptr<Proposer> make_hybrid_proposer(std::unique_ptr<Proposer> first,
                                               std::unique_ptr<Proposer> second);

}  // namespace optiflow::propose
