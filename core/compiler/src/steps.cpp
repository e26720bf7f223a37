// Running a step: its groups, each piece's root in each group, and the transfers of the
// pattern's tree (patterns.hpp), of bfs's search tree or of pack's tree packing.
#include "steps.hpp"

#include <algorithm>

#include "groups.hpp"
#include "optiflow/support/error.hpp"

namespace optiflow::compiler {

// One step's groups, prepared once for all the pieces it moves.
struct StepRunner::StepGroups {
  RankGroups members;                            // in the pattern's order
  RankGroups sorted;                             // ascending, for merging carriers
  std::vector<std::int32_t> group_of, position;  // per rank; position in the program's order
};

// One group of a step, as one piece meets it.
struct StepRunner::Group {
  const std::vector<std::int32_t>& members;  // in the pattern's order
  const std::vector<std::int32_t>& sorted;   // the same, ascending
  std::int32_t root_pos;                     // the piece's root, as a position in `members`
};

StepRunner::StepGroups StepRunner::step_groups(const At& at) {
  StepGroups g;
  g.members = resolve_groups(at.step.groups, at.scope.vars, at.pos, expressions_, context_);
  g.group_of.assign(static_cast<std::size_t>(context_.ranks()), -1);
  g.position.assign(static_cast<std::size_t>(context_.ranks()), -1);
  for (std::size_t k = 0; k < g.members.size(); ++k) {
    auto& members = g.members[k];
    for (std::size_t p = 0; p < members.size(); ++p) {
      g.group_of[static_cast<std::size_t>(members[p])] = static_cast<std::int32_t>(k);
      g.position[static_cast<std::size_t>(members[p])] = static_cast<std::int32_t>(p);
    }
    g.sorted.push_back(members);
    std::sort(g.sorted.back().begin(), g.sorted.back().end());
    if (at.step.reverse && at.step.pattern != dsl::Pattern::bfs)
      std::reverse(members.begin(), members.end());
  }
  return g;
}

void StepRunner::run(const dsl::Step& step, dsl::SourcePos pos, std::vector<std::int32_t>& active,
                     const Scope& scope) {
  const At at{step, pos, scope};
  const StepGroups g = step_groups(at);
  const bool reversed = step.reverse && step.pattern != dsl::Pattern::bfs;
  builder_.begin_step(pos, step.pattern == dsl::Pattern::pack);
  std::vector<std::int32_t> next;
  for (std::int32_t piece : active) {
    // The root of each group is its first carrier in the program's order.
    std::vector<std::int32_t> roots(g.members.size(), -1);
    for (std::int32_t c : builder_.piece(piece).carriers) {
      const std::int32_t k = g.group_of[static_cast<std::size_t>(c)];
      if (k < 0) continue;
      auto& root = roots[static_cast<std::size_t>(k)];
      if (root < 0 ||
          g.position[static_cast<std::size_t>(c)] < g.position[static_cast<std::size_t>(root)])
        root = c;
    }
    std::vector<std::int32_t> current{piece};
    for (std::size_t k = 0; k < g.members.size(); ++k) {
      if (roots[k] < 0) continue;
      const auto m = static_cast<std::int32_t>(g.members[k].size());
      const std::int32_t root_at = g.position[static_cast<std::size_t>(roots[k])];
      const Group group{g.members[k], g.sorted[k], reversed ? m - 1 - root_at : root_at};
      std::vector<std::int32_t> produced;
      for (std::int32_t p : current) {
        const auto out = spread(at, group, p);
        produced.insert(produced.end(), out.begin(), out.end());
      }
      current = std::move(produced);
    }
    next.insert(next.end(), current.begin(), current.end());
  }
  active = std::move(next);
}

// Moves piece `index` from the group's root through it; returns the piece(s) it becomes.
std::vector<std::int32_t> StepRunner::spread(const At& at, const Group& group, std::int32_t index) {
  const auto& members = group.members;
  const auto m = static_cast<std::int32_t>(members.size());
  const dsl::Pattern pattern = at.step.pattern;
  if (pattern == dsl::Pattern::scatter) return scatter(at, group, index);
  if (pattern == dsl::Pattern::pack) return move_along_packing(at, group, index);
  if (pattern == dsl::Pattern::dbtree) {
    const auto halves =
        builder_.split_piece(index, {support::Rational(1), support::Rational(1)}, at.pos);
    move_along(at, members, pattern_tree(dsl::Pattern::binary, 2, m, group.root_pos), halves[0]);
    move_along(at, members, mirrored_binary_tree(m, group.root_pos), halves[1]);
    for (std::int32_t half : halves) builder_.carry_to_group(half, group.sorted);
    return halves;
  }
  if (pattern == dsl::Pattern::bfs)
    move_along_bfs(at, members, group.root_pos, index);
  else
    move_along(at, members, pattern_tree(pattern, at.step.arity, m, group.root_pos), index);
  builder_.carry_to_group(index, group.sorted);
  return {index};
}

void StepRunner::move_along(const At& at, const std::vector<std::int32_t>& members,
                            const PatternTree& tree, std::int32_t index) {
  if (!tree.error.empty()) context_.fail(at.pos, tree.error);
  context_.spend(tree.edges.size(), at.pos);
  for (const TreeEdge& e : tree.edges)
    builder_.send(members[static_cast<std::size_t>(e.from)],
                  members[static_cast<std::size_t>(e.to)], index, e.round, -1, at.scope, at.pos);
}

std::vector<std::int32_t> StepRunner::scatter(const At& at, const Group& group,
                                              std::int32_t index) {
  const auto& members = group.members;
  const auto m = static_cast<std::int32_t>(members.size());
  if (m == 1) return {index};
  const auto subs = builder_.split_piece(
      index, std::vector<support::Rational>(static_cast<std::size_t>(m - 1), support::Rational(1)),
      at.pos);
  const std::int32_t root = members[static_cast<std::size_t>(group.root_pos)];
  for (std::int32_t k = 1; k < m; ++k) {
    const std::int32_t member = members[static_cast<std::size_t>((group.root_pos + k) % m)];
    const std::int32_t sub = subs[static_cast<std::size_t>(k - 1)];
    builder_.send(root, member, sub, 0, -1, at.scope, at.pos);
    builder_.carry_by_one(sub, group.sorted, member);
  }
  return subs;
}

// The group's throughput-optimal tree packing (topology/tree_packing.hpp), computed once per
// group and set of avoided links; the piece is cut in proportion to its root's trees' parts
// (their shares in whole sixteenths, topology::kPackParts), so that chunk counts stay small.
std::vector<std::int32_t> StepRunner::move_along_packing(const At& at, const Group& group,
                                                         std::int32_t index) {
  if (at.step.reverse) context_.fail(at.pos, "pack has no direction: drop `reverse`");
  if (group.sorted.size() < 2) return {index};
  const topology::TreePacking& packing = packing_for(at, group.sorted);
  const std::int32_t root = group.members[static_cast<std::size_t>(group.root_pos)];
  const auto root_at = static_cast<std::size_t>(
      std::lower_bound(packing.members.begin(), packing.members.end(), root) -
      packing.members.begin());
  std::vector<const topology::PackedTree*> trees;
  std::vector<support::Rational> weights;
  for (const topology::PackedTree& tree : packing.trees[root_at]) {
    if (tree.parts == 0) continue;
    trees.push_back(&tree);
    weights.emplace_back(tree.parts);
  }
  const auto pieces = builder_.split_piece(index, weights, at.pos);
  for (std::size_t k = 0; k < trees.size(); ++k) {
    context_.spend(trees[k]->edges.size(), at.pos);
    for (const topology::PackedEdge& e : trees[k]->edges)
      builder_.send(e.from_rank, e.to_rank, pieces[k], e.depth - 1, builder_.intern_path(e.path),
                    at.scope, at.pos);
  }
  for (std::int32_t piece : pieces) builder_.carry_to_group(piece, group.sorted);
  return pieces;
}

const topology::TreePacking& StepRunner::packing_for(const At& at,
                                                     const std::vector<std::int32_t>& members) {
  const std::set<topology::LinkId>& avoided = at.scope.avoided;
  auto key = std::make_pair(members, std::vector<topology::LinkId>(avoided.begin(), avoided.end()));
  if (auto it = packings_.find(key); it != packings_.end()) return it->second;
  try {
    return packings_
        .emplace(key,
                 topology::pack_spanning_trees(
                     context_.topo(), std::vector<int>(members.begin(), members.end()), avoided))
        .first->second;
  } catch (const support::InputError& e) {
    // The packing's own location is not the program's: keep only its message.
    const std::string what = e.what();
    const auto at_message = what.find("error: ");
    context_.fail(at.pos, at_message == std::string::npos ? what : what.substr(at_message + 7));
  }
}

// A spanning tree over the group from a breadth-first search of the topology from the root's
// GPU (lowest link id first, or highest with `reverse`), skipping avoided links; members are
// joined to their nearest member ancestor, along the search tree's path.
void StepRunner::move_along_bfs(const At& at, const std::vector<std::int32_t>& members,
                                std::int32_t root_pos, std::int32_t index) {
  const topology::Topology& topo = context_.topo();
  std::vector<char> is_member(static_cast<std::size_t>(context_.ranks()), 0);
  for (std::int32_t r : members) is_member[static_cast<std::size_t>(r)] = 1;
  auto member_gpu = [&](topology::NodeId v) {
    const topology::Node& n = topo.node(v);
    return n.kind == topology::NodeKind::gpu && is_member[static_cast<std::size_t>(n.rank)];
  };
  const topology::NodeId start = topo.gpu_of_rank(members[static_cast<std::size_t>(root_pos)]);
  std::vector<std::int64_t> parent(topo.node_count(), -1);
  std::vector<std::int32_t> depth(topo.node_count(), 0);
  std::vector<topology::NodeId> order{start};
  parent[start] = start;
  for (std::size_t head = 0; head < order.size(); ++head) {
    auto links = topo.out_links(order[head]);
    if (at.step.reverse) std::reverse(links.begin(), links.end());  // a different tree, same rules
    for (topology::LinkId l : links) {
      const topology::NodeId w = topo.link(l).dst;
      if (parent[w] >= 0 || at.scope.avoided.contains(l)) continue;
      parent[w] = order[head];
      order.push_back(w);
    }
  }
  context_.spend(order.size(), at.pos);
  for (topology::NodeId v : order) {
    if (v == start || !member_gpu(v)) continue;
    std::vector<topology::NodeId> path{v};
    auto up = static_cast<topology::NodeId>(parent[v]);
    for (; !member_gpu(up); up = static_cast<topology::NodeId>(parent[up])) path.push_back(up);
    path.push_back(up);
    std::reverse(path.begin(), path.end());
    depth[v] = depth[up] + 1;
    builder_.send(topo.node(up).rank, topo.node(v).rank, index, depth[v] - 1,
                  builder_.intern_path(std::move(path)), at.scope, at.pos);
  }
  for (std::int32_t r : members)
    if (parent[topo.gpu_of_rank(r)] < 0)
      context_.fail(at.pos, "bfs: rank " + std::to_string(r) + " cannot be reached from rank " +
                                std::to_string(members[static_cast<std::size_t>(root_pos)]) +
                                " without the avoided links");
}

}  // namespace optiflow::compiler
