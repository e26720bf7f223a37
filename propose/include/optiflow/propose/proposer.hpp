// The proposer interface: parents and their results in, DSL text out. The offline proposer
// and the language-model proposer both implement it.
#pragma once

#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "optiflow/support/collective.hpp"
#include "optiflow/topology/topology.hpp"

namespace optiflow::propose {

/// What every proposal is for.
struct ProposalContext {
  const topology::Topology* topology = nullptr;
  support::Collective collective = support::Collective::all_gather;
  std::vector<std::uint64_t> sizes;
};

/// How a parent program did at one size.
struct SizeResult {
  std::uint64_t size_bytes = 0;
  double time_us = 0;
  double bound_ratio = 0;  ///< time / lower bound (1 = optimal)
};

/// The busiest and the idlest links of a parent at the largest size, as node ids.
struct LinkNote {
  std::string from, to;
  double utilisation = 0;
};

struct Parent {
  std::string source;
  std::vector<SizeResult> results;  ///< empty when it did not compile
  std::string diagnostics;          ///< the compiler's message when it did not compile
  std::vector<LinkNote> busiest_links, idle_links;
};

struct ProposalRequest {
  std::vector<Parent> parents;  ///< 1 = mutate, 2 = combine; never empty
  std::uint64_t seed = 0;       ///< the proposal must depend only on this and the parents
};

/// A program and where it came from ("offline", "llm", ...), as the store records it.
struct Proposal {
  std::string source;
  std::string origin;
};

class Proposer {
 public:
  virtual ~Proposer() = default;
  virtual std::string name() const = 0;
  /// Programs to start from, in a fixed order (the template library, or a model's first ideas).
  virtual std::vector<Proposal> initial_programs() = 0;
  /// One new program; may be invalid (the evaluator rejects it with a diagnostic).
  virtual Proposal propose(const ProposalRequest& request) = 0;
};

/// Makes the proposer called `name` for `context`; throws support::InputError naming
/// --proposer for a name it does not know. The command line injects one into explore.
using ProposerFactory =
    std::function<std::unique_ptr<Proposer>(const std::string& name, const ProposalContext&)>;

/// The built-in proposer: parametric templates for the topology, then mutation and crossover
/// on the syntax tree, guided by the parents' results. Deterministic.
std::unique_ptr<Proposer> make_offline_proposer(const ProposalContext& context);

}  // namespace optiflow::propose
