// The rank groups a step runs in (docs/dsl.md, "Groups"): all, hosts, rails, under @switch,
// explicit lists, filtered by `where` and ordered by `by`.
#pragma once

#include <cstdint>
#include <vector>

#include "eval_context.hpp"
#include "expressions.hpp"

namespace optiflow::compiler {

/// Groups of ranks, each in the program's order.
using RankGroups = std::vector<std::vector<std::int32_t>>;

/// The non-empty groups `spec` names on the context's topology, members kept where `where` is
/// non-zero and sorted stably by the `by` key. A rank in two groups, a rank out of range or a
/// topology that lacks hosts or local indices is an error located at `step_pos`.
RankGroups resolve_groups(const dsl::GroupSpec& spec, const Variables& vars,
                          dsl::SourcePos step_pos, Expressions& expressions, EvalContext& context);

}  // namespace optiflow::compiler
