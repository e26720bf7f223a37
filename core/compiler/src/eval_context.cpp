// The shared state of a program's evaluation: located errors, the work budget, node names.
#include "eval_context.hpp"

#include <algorithm>
#include <chrono>

#include "optiflow/dsl/parser.hpp"

namespace optiflow::compiler {
namespace {

// Reading the clock costs more than most units of work, so it is read once per 2^16 units.
constexpr int kWorkPerClockLog2 = 16;

}  // namespace

EvalContext::EvalContext(const topology::Topology& topo, const std::string& source,
                         const std::string& text, const EvalLimits& limits)
    : topo_(topo), source_(source), text_(text), limits_(limits), ranks_(topo.rank_count()) {
  for (topology::NodeId v = 0; v < topo.node_count(); ++v) node_by_id_[topo.node(v).id] = v;
  for (topology::NodeId gpu : topo.gpus_by_rank()) {
    hosts_ = std::max(hosts_, topo.node(gpu).host + 1);
    locals_ = std::max(locals_, topo.node(gpu).local + 1);
  }
}

void EvalContext::fail(dsl::SourcePos pos, const std::string& message) const {
  throw dsl::DslError(support::SourceLocation{source_, pos.line, pos.column, {}}, message,
                      dsl::source_line(text_, pos.line));
}

void EvalContext::spend(std::size_t work, dsl::SourcePos pos) {
  const std::size_t before = work_;
  work_ += work;
  if (work_ > limits_.max_work)
    fail(pos, "evaluation exceeds its work limit (" + std::to_string(limits_.max_work) +
                  " operations): the program makes too many pieces or transfers");
  if ((work_ >> kWorkPerClockLog2) != (before >> kWorkPerClockLog2) &&
      std::chrono::steady_clock::now() > limits_.deadline)
    fail(pos,
         "evaluation exceeds its time limit: the program makes too many pieces or "
         "transfers");
}

support::Rational EvalContext::checked(std::optional<support::Rational> value,
                                       dsl::SourcePos pos) const {
  if (!value) fail(pos, "a number here exceeds 64-bit fractions (use simpler weights)");
  return *value;
}

topology::NodeId EvalContext::node(const std::string& id, dsl::SourcePos pos) const {
  auto it = node_by_id_.find(id);
  if (it == node_by_id_.end()) fail(pos, "topology '" + topo_.name() + "' has no node @" + id);
  return it->second;
}

}  // namespace optiflow::compiler
