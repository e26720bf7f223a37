// A step statement: each piece spreads through each group it meets, from its root, along the
// pattern's tree (docs/dsl.md, "Statements").
#pragma once

#include <cstdint>
#include <map>
#include <utility>
#include <vector>

#include "eval_context.hpp"
#include "expressions.hpp"
#include "optiflow/topology/tree_packing.hpp"
#include "patterns.hpp"
#include "plan_builder.hpp"

namespace optiflow::compiler {

/// Runs steps; keeps the tree packings it has computed, per group and set of avoided links.
class StepRunner {
 public:
  StepRunner(EvalContext& context, Expressions& expressions, PlanBuilder& builder)
      : context_(context), expressions_(expressions), builder_(builder) {}

  /// Moves every piece of `active` through the step's groups; `active` becomes the pieces
  /// that come out (dbtree, scatter and pack cut them).
  void run(const dsl::Step& step, dsl::SourcePos pos, std::vector<std::int32_t>& active,
           const Scope& scope);

 private:
  struct StepGroups;
  struct Group;
  // The step being run, where it is written, and its block's scope.
  struct At {
    const dsl::Step& step;
    dsl::SourcePos pos;
    const Scope& scope;
  };

  StepGroups step_groups(const At& at);
  std::vector<std::int32_t> spread(const At& at, const Group& group, std::int32_t index);
  void move_along(const At& at, const std::vector<std::int32_t>& members, const PatternTree& tree,
                  std::int32_t index);
  std::vector<std::int32_t> scatter(const At& at, const Group& group, std::int32_t index);
  std::vector<std::int32_t> move_along_packing(const At& at, const Group& group,
                                               std::int32_t index);
  const topology::TreePacking& packing_for(const At& at, const std::vector<std::int32_t>& members);
  void move_along_bfs(const At& at, const std::vector<std::int32_t>& members, std::int32_t root_pos,
                      std::int32_t index);

  EvalContext& context_;
  Expressions& expressions_;
  PlanBuilder& builder_;
  std::map<std::pair<std::vector<std::int32_t>, std::vector<topology::LinkId>>,
           topology::TreePacking>
      packings_;  // by group and avoided links
};

}  // namespace optiflow::compiler
