// What every part of a program's evaluation shares: the topology and its names, the source
// that errors point into, the limits and the work spent against them, and a block's scope.
#pragma once

#include <cstddef>
#include <cstdint>
#include <map>
#include <optional>
#include <set>
#include <string>
#include <vector>

#include "optiflow/compiler/limits.hpp"
#include "optiflow/dsl/ast.hpp"
#include "optiflow/support/rational.hpp"
#include "optiflow/topology/topology.hpp"

namespace optiflow::compiler {

/// The numbers that `let` and `split ... as` bind, by name.
using Variables = std::map<std::string, support::Rational>;

/// A transfer from rank `from` to rank `to` takes the plan's explicit route `path`.
struct RouteRule {
  std::int32_t from = 0, to = 0, path = 0;
};

/// What a block sees: variables, explicit routes and avoided links, all block-scoped.
struct Scope {
  Variables vars;
  std::vector<RouteRule> routes;
  std::set<topology::LinkId> avoided;
  std::int32_t avoid_set = 0;  ///< `avoided`'s index in Plan::avoid_sets
};

/// The topology, the program's text and the limits of one evaluation.
class EvalContext {
 public:
  EvalContext(const topology::Topology& topo, const std::string& source, const std::string& text,
              const EvalLimits& limits);

  /// Throws the DslError `message` located at `pos` of the program.
  [[noreturn]] void fail(dsl::SourcePos pos, const std::string& message) const;
  /// Counts `work` units against EvalLimits::max_work and the deadline; fails at `pos` past them.
  void spend(std::size_t work, dsl::SourcePos pos);
  /// The value of an exact operation, or a located error where it overflowed.
  support::Rational checked(std::optional<support::Rational> value, dsl::SourcePos pos) const;
  /// The node with id `id`, or a located error naming the topology.
  topology::NodeId node(const std::string& id, dsl::SourcePos pos) const;

  const topology::Topology& topo() const { return topo_; }
  const EvalLimits& limits() const { return limits_; }
  std::int32_t ranks() const { return ranks_; }
  std::int32_t hosts() const { return hosts_; }
  std::int32_t locals() const { return locals_; }  ///< GPUs per host (the largest local index + 1)

 private:
  const topology::Topology& topo_;
  const std::string& source_;
  const std::string& text_;
  EvalLimits limits_;
  std::int32_t ranks_ = 0, hosts_ = 0, locals_ = 0;
  std::size_t work_ = 0;
  std::map<std::string, topology::NodeId> node_by_id_;
};

}  // namespace optiflow::compiler
