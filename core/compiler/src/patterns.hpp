// The dissemination tree each DSL pattern builds inside one group, for one root.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "optiflow/dsl/ast.hpp"

namespace optiflow::compiler {

/// An edge between positions in the group's member list; `round` is the pattern's round.
struct TreeEdge {
  std::int32_t from = 0;
  std::int32_t to = 0;
  std::int32_t round = 0;
};

/// Edges of the tree that spreads data from position `root` to all `members` positions,
/// parents before children. Not for scatter, dbtree (two binary trees) or bfs (from the
/// topology). Returns an error message instead when the pattern cannot apply.
struct PatternTree {
  std::vector<TreeEdge> edges;
  std::string error;
};
PatternTree pattern_tree(dsl::Pattern pattern, int arity, std::int32_t members, std::int32_t root);

/// dbtree's second tree: a binary tree over the mirrored order, so that the first tree's
/// inner nodes are mostly the second one's leaves.
PatternTree mirrored_binary_tree(std::int32_t members, std::int32_t root);

}  // namespace optiflow::compiler
