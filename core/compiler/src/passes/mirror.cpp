// The mirror pass: the All-Gather plan becomes the Reduce-Scatter that mirrors it in time, or
// the All-Reduce (that Reduce-Scatter, then the All-Gather, each root waiting for its data).
#include <algorithm>
#include <tuple>

#include "optiflow/support/error.hpp"
#include "pass_table.hpp"

namespace optiflow::compiler::passes {
namespace {

// An All-Gather transfer without dependencies leaves the owner of its data (every other sender
// got the data from a transfer it waits for), and the Reduce-Scatter transfers into that owner
// that carry its own data are the mirrors of exactly those roots.
std::vector<std::vector<Index>> roots_by_owner(const Plan& ag) {
  std::vector<std::vector<Index>> roots(at(ag.ranks));
  for (Index t = 0; t < static_cast<Index>(ag.transfers.size()); ++t)
    if (ag.deps[at(t)].empty()) roots[at(ag.transfers[at(t)].src)].push_back(t);
  return roots;
}

// How many of `roots` overlap each of them, from two binary searches each: those that begin
// before it ends, less those that end before it begins.
void count_overlaps(const Plan& ag, const std::vector<Index>& roots,
                    std::vector<std::uint32_t>& counts) {
  std::vector<support::Rational> begins, ends;
  for (Index r : roots) {
    begins.push_back(ag.transfers[at(r)].data.begin);
    ends.push_back(ag.transfers[at(r)].data.end);
  }
  std::sort(begins.begin(), begins.end());
  std::sort(ends.begin(), ends.end());
  for (Index r : roots) {
    const Interval& d = ag.transfers[at(r)].data;
    const auto starting = std::lower_bound(begins.begin(), begins.end(), d.end) - begins.begin();
    const auto finished = std::upper_bound(ends.begin(), ends.end(), d.begin) - ends.begin();
    counts[at(r)] = static_cast<std::uint32_t>(starting - finished);
  }
}

// Calls found(root, other) for every pair of overlapping roots, in time proportional to the
// pairs: sweeping the roots by where they begin, the ones that began earlier and still
// reach past the current begin are kept in a heap by their end.
template <typename Found>
void for_each_overlap(const Plan& ag, std::vector<Index> roots, Found found) {
  auto data = [&](Index r) -> const Interval& { return ag.transfers[at(r)].data; };
  std::sort(roots.begin(), roots.end(), [&](Index a, Index b) {
    return std::tie(data(a).begin, a) < std::tie(data(b).begin, b);
  });
  auto ends_later = [&](Index a, Index b) { return data(b).end < data(a).end; };
  std::vector<Index> open;  // a heap: the earliest end on top
  std::size_t started = 0;
  for (std::size_t q = 0; q < roots.size(); ++q) {
    const Interval& d = data(roots[q]);
    for (; started < roots.size() && data(roots[started]).begin < d.begin; ++started) {
      open.push_back(roots[started]);
      std::push_heap(open.begin(), open.end(), ends_later);
    }
    while (!open.empty() && data(open.front()).end <= d.begin) {
      std::pop_heap(open.begin(), open.end(), ends_later);
      open.pop_back();
    }
    for (Index r : open) found(roots[q], r);
    for (std::size_t k = started; k < roots.size() && data(roots[k]).begin < d.end; ++k)
      found(roots[q], roots[k]);
  }
}

[[noreturn]] void fail_join_limit(const Plan& ag, const std::vector<std::uint32_t>& counts,
                                  const EvalLimits& limits, const ProgramText& program) {
  // Point at the step whose roots wait the most.
  std::vector<std::size_t> per_statement(ag.statements.size() + 1, 0);
  for (std::size_t t = 0; t < counts.size(); ++t)
    per_statement[at(ag.transfers[t].statement + 1)] += counts[t];
  const auto worst = std::max_element(per_statement.begin(), per_statement.end());
  fail_at_statement(program, ag, static_cast<Index>(worst - per_statement.begin()) - 1,
                    "as an All-Reduce, this step's data waits for more than " +
                        std::to_string(limits.max_join_dependencies) +
                        " reductions before it is gathered (each send from a data's owner waits "
                        "for every reduction into that data): send from the owner to fewer "
                        "ranks, e.g. with a ring or a tree instead of direct");
}

// For each All-Gather transfer, the Reduce-Scatter transfers (indices in the mirrored plan)
// it waits for: none for forwarded data; for a root, every reduction into its data.
IndexLists join_dependencies(const Plan& ag, const EvalLimits& limits, const ProgramText& program) {
  const auto n = static_cast<Index>(ag.transfers.size());
  const auto roots = roots_by_owner(ag);
  std::vector<std::uint32_t> counts(at(n), 0);
  std::size_t total = 0;
  for (const auto& owned : roots) {
    count_overlaps(ag, owned, counts);
    for (Index r : owned) total += counts[at(r)];
  }
  if (total > limits.max_join_dependencies) fail_join_limit(ag, counts, limits, program);
  IndexLists joins = gather_lists(counts, [&](auto place) {
    for (const auto& owned : roots)
      for_each_overlap(ag, owned, [&](Index root, Index other) { place(at(root), n - 1 - other); });
  });
  return joins;
}

}  // namespace

Plan mirror_reduce_scatter(const Plan& ag) {
  Plan rs = empty_like(ag);
  const auto n = static_cast<Index>(ag.transfers.size());
  const IndexLists children = dependents(ag);
  std::int32_t last_stage = 0, last_round = 0;
  for (const Transfer& t : ag.transfers) {
    last_stage = std::max(last_stage, t.stage);
    last_round = std::max(last_round, t.round);
  }
  std::vector<std::int32_t> reversed_route(ag.explicit_routes.size(), -1);
  rs.transfers.reserve(at(n));
  std::vector<Index> deps;
  for (Index i = 0; i < n; ++i) {
    const Index t = n - 1 - i;
    Transfer back = ag.transfers[at(t)];
    std::swap(back.src, back.dst);
    back.reduce = true;
    back.stage = last_stage - back.stage;
    back.round = last_round - back.round;
    if (back.explicit_route >= 0) {  // the reversed path, stored once
      auto& id = reversed_route[at(back.explicit_route)];
      if (id < 0) {
        auto path = ag.explicit_routes[at(back.explicit_route)];
        std::reverse(path.begin(), path.end());
        id = static_cast<std::int32_t>(rs.explicit_routes.size());
        rs.explicit_routes.push_back(std::move(path));
      }
      back.explicit_route = id;
    }
    // Children come in ascending order, so their mirrors descend.
    const auto kids = children[at(t)];
    deps.clear();
    for (auto c = kids.rbegin(); c != kids.rend(); ++c) deps.push_back(n - 1 - *c);
    rs.add(back, deps);
  }
  return rs;
}

Plan all_reduce(const Plan& ag, const EvalLimits& limits, const ProgramText& program) {
  const IndexLists joins = join_dependencies(ag, limits, program);
  Plan plan = mirror_reduce_scatter(ag);
  const auto offset = static_cast<Index>(plan.transfers.size());
  std::int32_t stage_offset = 0;
  for (const Transfer& t : plan.transfers) stage_offset = std::max(stage_offset, t.stage + 1);
  plan.transfers.reserve(2 * plan.transfers.size());
  std::vector<Index> deps;
  for (std::size_t t = 0; t < ag.transfers.size(); ++t) {
    Transfer x = ag.transfers[t];
    x.stage += stage_offset;  // explicit routes keep their ids: the mirror kept ag's first
    deps.clear();
    for (Index d : ag.deps[t]) deps.push_back(d + offset);
    if (deps.empty()) {
      deps.assign(joins[t].begin(), joins[t].end());
      std::sort(deps.begin(), deps.end());
    }
    plan.add(x, deps);
  }
  return plan;
}

// The All-Gather stays as it is; a collective programs cannot compile to is the caller's
// error, found here because only this pass depends on the collective.
void mirror_pass(CompileState& state) {
  switch (state.options.collective) {
    case support::Collective::all_gather:
      return;
    case support::Collective::reduce_scatter:
      state.plan = mirror_reduce_scatter(state.plan);
      return;
    case support::Collective::all_reduce:
      state.plan = all_reduce(state.plan, state.limits, state.text);
      return;
    default:
      throw support::OptionError("collective",
                                 "programs compile to allgather, reducescatter and allreduce; "
                                 "not to " +
                                     std::string(to_string(state.options.collective)),
                                 state.text.source);
  }
}

}  // namespace optiflow::compiler::passes
