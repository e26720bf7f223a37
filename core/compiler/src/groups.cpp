// Resolving a step's group specification into the ranks of each group.
#include "groups.hpp"

#include <algorithm>
#include <map>
#include <numeric>
#include <queue>
#include <utility>

namespace optiflow::compiler {
namespace {

class GroupResolver {
 public:
  GroupResolver(const Variables& vars, dsl::SourcePos pos, Expressions& expressions,
                EvalContext& context)
      : vars_(vars), pos_(pos), expressions_(expressions), context_(context) {}

  RankGroups resolve(const dsl::GroupSpec& spec) {
    RankGroups result = members(spec);
    for (auto& group : result) order_and_filter(group, spec);
    std::erase_if(result, [](const auto& g) { return g.empty(); });
    std::vector<char> seen(static_cast<std::size_t>(context_.ranks()), 0);
    for (const auto& g : result)
      for (std::int32_t r : g)
        if (seen[static_cast<std::size_t>(r)]++)
          context_.fail(pos_, "rank " + std::to_string(r) + " appears twice in this step's groups");
    return result;
  }

 private:
  // Before `where` and `by`: every member, in rank order (lists: as written).
  RankGroups members(const dsl::GroupSpec& spec) {
    const topology::Topology& topo = context_.topo();
    RankGroups result;
    switch (spec.kind) {
      case dsl::GroupSpec::Kind::all:
        result.emplace_back(static_cast<std::size_t>(context_.ranks()));
        std::iota(result.back().begin(), result.back().end(), 0);
        break;
      case dsl::GroupSpec::Kind::hosts:
        result = by_attribute([](const topology::Node& n) { return n.host; }, "host");
        break;
      case dsl::GroupSpec::Kind::rails:
        result = by_attribute([](const topology::Node& n) { return n.local; }, "local index");
        break;
      case dsl::GroupSpec::Kind::under:
        result.push_back(gpus_under(topo, context_.node(spec.node, pos_)));
        break;
      case dsl::GroupSpec::Kind::lists:
        for (const auto& list : spec.lists) result.push_back(list_members(list));
        break;
    }
    return result;
  }

  // One group per value of `attribute`, in increasing order of the value.
  template <typename Attribute>
  RankGroups by_attribute(Attribute attribute, const char* what) const {
    const topology::Topology& topo = context_.topo();
    std::map<int, std::vector<std::int32_t>> grouped;
    for (std::int32_t r = 0; r < context_.ranks(); ++r) {
      const int key = attribute(topo.node(topo.gpu_of_rank(r)));
      if (key < 0)
        context_.fail(pos_, "topology '" + topo.name() + "' gives no " + what + " for rank " +
                                std::to_string(r));
      grouped[key].push_back(r);
    }
    RankGroups result;
    for (auto& [key, members] : grouped) result.push_back(std::move(members));
    return result;
  }

  // GPUs that reach `sw` without crossing another switch or GPU (through NICs, CPUs).
  static std::vector<std::int32_t> gpus_under(const topology::Topology& topo, topology::NodeId sw) {
    std::vector<char> seen(topo.node_count(), 0);
    std::vector<std::int32_t> ranks;
    std::queue<topology::NodeId> frontier;
    frontier.push(sw);
    seen[sw] = 1;
    while (!frontier.empty()) {
      const topology::NodeId v = frontier.front();
      frontier.pop();
      for (topology::LinkId l : topo.in_links(v)) {
        const topology::NodeId u = topo.link(l).src;
        if (seen[u]) continue;
        seen[u] = 1;
        const topology::Node& n = topo.node(u);
        if (n.kind == topology::NodeKind::gpu)
          ranks.push_back(n.rank);
        else if (n.kind != topology::NodeKind::switch_)
          frontier.push(u);
      }
    }
    std::sort(ranks.begin(), ranks.end());
    return ranks;
  }

  std::vector<std::int32_t> list_members(const std::vector<dsl::Expr>& items) {
    const std::int32_t last_rank = context_.ranks() - 1;
    std::vector<std::int32_t> members;
    for (const dsl::Expr& item : items) {
      if (item.kind != dsl::Expr::Kind::range) {
        members.push_back(expressions_.rank(item, vars_));
        continue;
      }
      const std::int64_t first =
          expressions_.integer(item.args[0], vars_, kNoMember, 0, last_rank, "a rank");
      const std::int64_t last = expressions_.integer(item.args[1], vars_, kNoMember, first,
                                                     last_rank, "the end of the range");
      for (std::int64_t r = first; r <= last; ++r) members.push_back(static_cast<std::int32_t>(r));
    }
    return members;
  }

  void order_and_filter(std::vector<std::int32_t>& members, const dsl::GroupSpec& spec) {
    if (spec.where)
      std::erase_if(members, [&](std::int32_t r) {
        return expressions_.number(*spec.where, vars_, r) == support::Rational(0);
      });
    if (!spec.by) return;
    std::vector<std::pair<Value, std::int32_t>> keyed;
    for (std::int32_t r : members) keyed.emplace_back(expressions_.eval(*spec.by, vars_, r), r);
    std::stable_sort(keyed.begin(), keyed.end());
    for (std::size_t i = 0; i < keyed.size(); ++i) members[i] = keyed[i].second;
  }

  const Variables& vars_;
  dsl::SourcePos pos_;
  Expressions& expressions_;
  EvalContext& context_;
};

}  // namespace

RankGroups resolve_groups(const dsl::GroupSpec& spec, const Variables& vars,
                          dsl::SourcePos step_pos, Expressions& expressions, EvalContext& context) {
  return GroupResolver(vars, step_pos, expressions, context).resolve(spec);
}

}  // namespace optiflow::compiler
