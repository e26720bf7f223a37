// Evaluation of DSL programs: each statement is interpreted on the pieces of data it governs,
// recording the transfers that move them (docs/dsl.md, "Semantics"). The statements are here;
// expressions, groups, steps and the plan being built have their own files.
#include "optiflow/compiler/evaluate.hpp"

#include <algorithm>
#include <variant>

#include "eval_context.hpp"
#include "expressions.hpp"
#include "optiflow/dsl/parser.hpp"
#include "plan_builder.hpp"
#include "steps.hpp"

namespace optiflow::compiler {
namespace {

constexpr std::int64_t kMaxSplitParts = 1024;
constexpr std::int64_t kMaxPipeline = 256;

// Runs the statements of a program block by block; steps go to StepRunner, pieces and
// transfers to PlanBuilder, expressions to Expressions.
class Evaluator {
 public:
  Evaluator(const topology::Topology& topo, const std::string& source, const std::string& text,
            const EvalLimits& limits)
      : context_(topo, source, text, limits),
        expressions_(context_),
        builder_(context_),
        steps_(context_, expressions_, builder_) {}

  Plan run(const dsl::Program& program) {
    builder_.set_pipeline(final_pipeline(program));
    std::vector<std::int32_t> active = builder_.own_shares();
    Scope scope;
    run_block(program.body, active, scope, /*top_level=*/true);
    const dsl::SourcePos end{program.body.empty() ? 1 : program.body.back().pos.line, 1};
    builder_.require_complete(active, end);
    return builder_.take();
  }

 private:
  // The pipeline depth the program ends up with, looked up before anything is cut, so that
  // every limit counts the slices of pieces and transfers made before a late `pipeline` line.
  // Only top-level `let` and `pipeline` can decide it; an error there is left for the
  // evaluation proper to report in its place.
  std::int32_t final_pipeline(const dsl::Program& program) {
    Variables vars;
    std::int32_t depth = 1;
    try {
      for (const dsl::Statement& s : program.body) {
        if (const auto* let = s.get_if<dsl::Let>())
          vars[let->name] = expressions_.number(let->value, vars, kNoMember);
        if (const auto* pipeline = s.get_if<dsl::Pipeline>())
          depth = static_cast<std::int32_t>(
              expressions_.integer(pipeline->value, vars, kNoMember, 1, kMaxPipeline, "pipeline"));
      }
    } catch (const dsl::DslError&) {
    }
    return depth;
  }

  void run_block(const dsl::Block& block, std::vector<std::int32_t>& active, Scope scope,
                 bool top_level) {
    for (const dsl::Statement& s : block) {
      const At at{s.pos, active, scope, top_level};
      std::visit([&](const auto& kind) { run(kind, at); }, s.node);
    }
  }

  // Where a statement runs: the pieces it governs, its block's scope, and whether that block is
  // the program's top level.
  struct At {
    dsl::SourcePos pos;
    std::vector<std::int32_t>& active;
    Scope& scope;
    bool top_level;
  };

  void run(const dsl::Let& s, const At& at) {
    at.scope.vars[s.name] = expressions_.number(s.value, at.scope.vars, kNoMember);
  }
  // final_pipeline() found the same depth before evaluation began, and the limits used it.
  void run(const dsl::Pipeline& s, const At& at) {
    builder_.set_pipeline(setting(s.value, at, "pipeline", kMaxPipeline));
  }
  void run(const dsl::Channels& s, const At& at) {
    builder_.set_channels(setting(s.value, at, "channels", kMaxChannels));
  }
  void run(const dsl::Protocol& s, const At& at) {
    if (!at.top_level)
      context_.fail(at.pos, "'protocol' applies to the whole program: put it at the top level");
    builder_.set_protocol(topology::protocol_from_string(s.name));
  }
  void run(const dsl::Step& s, const At& at) { steps_.run(s, at.pos, at.active, at.scope); }
  void run(const dsl::SplitEven& s, const At& at);
  void run(const dsl::SplitWeighted& s, const At& at);
  void run(const dsl::Route& s, const At& at);
  void run(const dsl::Avoid& s, const At& at);

  std::int32_t setting(const dsl::Expr& value, const At& at, const char* name, std::int64_t limit) {
    if (!at.top_level)
      context_.fail(at.pos, std::string("'") + name +
                                "' applies to the whole program: put it at the top level");
    return static_cast<std::int32_t>(
        expressions_.integer(value, at.scope.vars, kNoMember, 1, limit, name));
  }

  std::vector<support::Rational> branch_weights(const dsl::SplitWeighted& s, std::int32_t source,
                                                const At& at);
  bool has_link(topology::NodeId a, topology::NodeId b) const;

  EvalContext context_;
  Expressions expressions_;
  PlanBuilder builder_;
  StepRunner steps_;
};

void Evaluator::run(const dsl::SplitEven& s, const At& at) {
  const std::int64_t parts = expressions_.integer(s.parts, at.scope.vars, kNoMember, 1,
                                                  kMaxSplitParts, "the number of parts");
  // Checked before cutting any piece: each active piece becomes `parts` pieces.
  builder_.require_pieces(
      builder_.piece_count() + at.active.size() * static_cast<std::size_t>(parts), at.pos);
  const std::vector<support::Rational> weights(static_cast<std::size_t>(parts),
                                               support::Rational(1));
  std::vector<std::vector<std::int32_t>> per_part(static_cast<std::size_t>(parts));
  for (std::int32_t piece : at.active) {
    const auto subs = builder_.split_piece(piece, weights, at.pos);
    for (std::size_t i = 0; i < subs.size(); ++i) per_part[i].push_back(subs[i]);
  }
  std::vector<std::int32_t> result;
  for (std::int64_t i = 0; i < parts; ++i) {
    Scope inner = at.scope;
    inner.vars[s.name] = support::Rational(i);
    auto& part = per_part[static_cast<std::size_t>(i)];
    run_block(s.body, part, inner, false);
    result.insert(result.end(), part.begin(), part.end());
  }
  at.active = std::move(result);
}

void Evaluator::run(const dsl::SplitWeighted& s, const At& at) {
  std::vector<std::vector<std::int32_t>> per_branch(s.branches.size());
  for (std::int32_t piece : at.active) {
    const std::vector<support::Rational> weights =
        branch_weights(s, builder_.piece(piece).source, at);
    const auto subs = builder_.split_piece(piece, weights, at.pos);
    for (std::size_t b = 0, k = 0; b < weights.size(); ++b)
      if (weights[b] > support::Rational(0)) per_branch[b].push_back(subs[k++]);
  }
  std::vector<std::int32_t> result;
  for (std::size_t b = 0; b < s.branches.size(); ++b) {
    run_block(s.branches[b].body, per_branch[b], at.scope, false);
    result.insert(result.end(), per_branch[b].begin(), per_branch[b].end());
  }
  at.active = std::move(result);
}

// The branches' weights for the data of rank `source`: non-negative, not all zero.
std::vector<support::Rational> Evaluator::branch_weights(const dsl::SplitWeighted& s,
                                                         std::int32_t source, const At& at) {
  std::vector<support::Rational> weights;
  for (const dsl::Branch& b : s.branches) {
    const support::Rational w = expressions_.number(b.weight, at.scope.vars, source);
    if (w < support::Rational(0))
      context_.fail(b.weight.pos, "weight " + w.to_string() +
                                      " is negative (for the data of rank " +
                                      std::to_string(source) + ")");
    weights.push_back(w);
  }
  if (std::all_of(weights.begin(), weights.end(),
                  [](support::Rational w) { return w == support::Rational(0); }))
    context_.fail(at.pos, "every weight is 0 for the data of rank " + std::to_string(source) +
                              ": give it a branch with a positive weight");
  return weights;
}

void Evaluator::run(const dsl::Route& s, const At& at) {
  const topology::Topology& topo = context_.topo();
  const std::int32_t from = expressions_.rank(s.from, at.scope.vars);
  const std::int32_t to = expressions_.rank(s.to, at.scope.vars);
  const topology::NodeId source = topo.gpu_of_rank(from), destination = topo.gpu_of_rank(to);
  std::vector<topology::NodeId> path{source};
  for (const dsl::Expr& hop : s.via) {
    path.push_back(context_.node(hop.text, hop.pos));
    if (path.back() == source || path.back() == destination)
      context_.fail(hop.pos,
                    "route: @" + hop.text + " is the route's " +
                        (path.back() == source ? "source" : "destination") +
                        "; 'via' lists only the nodes in between, not the source or destination");
  }
  path.push_back(destination);
  for (std::size_t i = 0; i + 1 < path.size(); ++i)
    if (!has_link(path[i], path[i + 1]))
      context_.fail(at.pos, "route: no link from @" + topo.node(path[i]).id + " to @" +
                                topo.node(path[i + 1]).id);
  at.scope.routes.push_back(RouteRule{from, to, builder_.intern_path(std::move(path))});
}

bool Evaluator::has_link(topology::NodeId a, topology::NodeId b) const {
  const topology::Topology& topo = context_.topo();
  for (topology::LinkId l : topo.out_links(a))
    if (topo.link(l).dst == b) return true;
  return false;
}

void Evaluator::run(const dsl::Avoid& s, const At& at) {
  const topology::Topology& topo = context_.topo();
  for (const dsl::LinkRef& ref : s.links) {
    const topology::NodeId a = context_.node(ref.from, at.pos), b = context_.node(ref.to, at.pos);
    std::size_t found = 0;
    for (topology::LinkId l : topo.out_links(a))
      if (topo.link(l).dst == b) at.scope.avoided.insert(l), ++found;
    if (ref.both)
      for (topology::LinkId l : topo.out_links(b))
        if (topo.link(l).dst == a) at.scope.avoided.insert(l), ++found;
    if (found == 0) context_.fail(at.pos, "avoid: no link joins @" + ref.from + " and @" + ref.to);
  }
  at.scope.avoid_set = builder_.intern_avoid_set(at.scope.avoided);
}

}  // namespace

Plan evaluate(const dsl::Program& program, const topology::Topology& topology,
              const std::string& source, const std::string& text, const EvalLimits& limits) {
  return Evaluator(topology, source, text, limits).run(program);
}

}  // namespace optiflow::compiler
