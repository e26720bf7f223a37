#include "passes.hpp"

#include <algorithm>
#include <map>
#include <numeric>
#include <queue>
#include <tuple>

#include "optiflow/dsl/parser.hpp"
#include "optiflow/topology/routing.hpp"

namespace optiflow::compiler::passes {
namespace {

using Index = std::int32_t;

std::size_t at(Index i) {
  return static_cast<std::size_t>(i);
}

bool overlaps(const Interval& a, const Interval& b) {
  return a.begin < b.end && b.begin < a.end;
}

support::Rational at(const Interval& i, std::int64_t k, std::int64_t parts) {
  // begin + (end - begin) * k / parts; every value here is a small fraction of the buffer.
  return *add(i.begin, *mul(*sub(i.end, i.begin), *support::Rational::make(k, parts)));
}

// For each transfer, the transfers that list it as a dependency.
std::vector<std::vector<Index>> dependents(const Plan& plan) {
  std::vector<std::vector<Index>> out(plan.transfers.size());
  for (std::size_t t = 0; t < plan.transfers.size(); ++t)
    for (Index d : plan.transfers[t].deps)
      out[static_cast<std::size_t>(d)].push_back(static_cast<Index>(t));
  return out;
}

// --- All-Reduce: each root of the All-Gather waits for the reductions into its data ---------

// An All-Gather transfer without dependencies leaves the owner of its data (every other sender
// got the data from a transfer it waits for), and the Reduce-Scatter transfers into that owner
// that carry its own data are the mirrors of exactly those roots.
std::vector<std::vector<Index>> roots_by_owner(const Plan& ag) {
  std::vector<std::vector<Index>> roots(at(ag.ranks));
  for (Index t = 0; t < static_cast<Index>(ag.transfers.size()); ++t)
    if (ag.transfers[at(t)].deps.empty()) roots[at(ag.transfers[at(t)].src)].push_back(t);
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

// Rejects an All-Reduce whose roots would wait for more reductions than the limit allows,
// counting them before any is stored.
void require_join_limit(const Plan& ag, const EvalLimits& limits, const ProgramText& program) {
  std::vector<std::uint32_t> counts(ag.transfers.size(), 0);
  std::size_t total = 0;
  for (const auto& owned : roots_by_owner(ag)) {
    count_overlaps(ag, owned, counts);
    for (Index r : owned) total += counts[at(r)];
  }
  if (total > limits.max_join_dependencies) fail_join_limit(ag, counts, limits, program);
}

}  // namespace

void fail_at_statement(const ProgramText& program, const Plan& plan, std::int32_t statement,
                       const std::string& message) {
  const StatementPos pos = statement >= 0 && at(statement) < plan.statements.size()
                               ? plan.statements[at(statement)]
                               : StatementPos{};
  throw dsl::DslError(support::SourceLocation{program.source, pos.line, pos.column, {}}, message,
                      dsl::source_line(program.text, pos.line));
}

void pipeline(Plan& plan) {
  const std::int64_t k = plan.pipeline;
  if (k <= 1) return;
  std::vector<Transfer> sliced;
  sliced.reserve(plan.transfers.size() * static_cast<std::size_t>(k));
  std::vector<Index> first_slice(plan.transfers.size());
  for (std::size_t t = 0; t < plan.transfers.size(); ++t) {
    const Transfer& whole = plan.transfers[t];
    first_slice[t] = static_cast<Index>(sliced.size());
    for (std::int64_t s = 0; s < k; ++s) {
      Transfer part = whole;
      part.data = Interval{at(whole.data, s, k), at(whole.data, s + 1, k)};
      part.slice = static_cast<std::int32_t>(s);
      part.deps.clear();
      for (Index d : whole.deps)
        for (std::int64_t ds = 0; ds < k; ++ds) {
          const Index candidate = first_slice[static_cast<std::size_t>(d)] + static_cast<Index>(ds);
          if (overlaps(sliced[static_cast<std::size_t>(candidate)].data, part.data))
            part.deps.push_back(candidate);
        }
      sliced.push_back(std::move(part));
    }
  }
  plan.transfers = std::move(sliced);
}

Plan mirror_reduce_scatter(const Plan& ag) {
  Plan rs = ag;
  const auto n = static_cast<Index>(ag.transfers.size());
  const auto children = dependents(ag);
  std::int32_t last_stage = 0, last_round = 0;
  for (const Transfer& t : ag.transfers) {
    last_stage = std::max(last_stage, t.stage);
    last_round = std::max(last_round, t.round);
  }
  for (Index t = 0; t < n; ++t) {
    const Transfer& forward = ag.transfers[static_cast<std::size_t>(t)];
    Transfer& back = rs.transfers[static_cast<std::size_t>(n - 1 - t)];
    back = forward;
    std::swap(back.src, back.dst);
    back.reduce = true;
    back.stage = last_stage - forward.stage;
    back.round = last_round - forward.round;
    back.deps.clear();
    for (Index c : children[static_cast<std::size_t>(t)]) back.deps.push_back(n - 1 - c);
    std::sort(back.deps.begin(), back.deps.end());
    if (back.explicit_route >= 0) {  // the reversed path
      auto path = ag.explicit_routes[static_cast<std::size_t>(back.explicit_route)];
      std::reverse(path.begin(), path.end());
      back.explicit_route = static_cast<std::int32_t>(rs.explicit_routes.size());
      rs.explicit_routes.push_back(std::move(path));
    }
  }
  return rs;
}

Plan all_reduce(const Plan& ag, const EvalLimits& limits, const ProgramText& program) {
  require_join_limit(ag, limits, program);
  Plan plan = mirror_reduce_scatter(ag);
  const auto offset = static_cast<Index>(plan.transfers.size());
  std::int32_t stage_offset = 0;
  for (const Transfer& t : plan.transfers) stage_offset = std::max(stage_offset, t.stage + 1);
  std::vector<std::vector<Index>> reduced_into(static_cast<std::size_t>(plan.ranks));
  for (Index t = 0; t < offset; ++t)
    reduced_into[static_cast<std::size_t>(plan.transfers[static_cast<std::size_t>(t)].dst)]
        .push_back(t);
  const auto route_offset = static_cast<std::int32_t>(plan.explicit_routes.size());
  plan.explicit_routes.insert(plan.explicit_routes.end(), ag.explicit_routes.begin(),
                              ag.explicit_routes.end());
  for (Transfer t : ag.transfers) {
    for (Index& d : t.deps) d += offset;
    if (t.deps.empty())  // a root: its data is complete once every reduction into it is done
      for (Index r : reduced_into[static_cast<std::size_t>(t.src)])
        if (overlaps(plan.transfers[static_cast<std::size_t>(r)].data, t.data)) t.deps.push_back(r);
    std::sort(t.deps.begin(), t.deps.end());
    t.stage += stage_offset;
    if (t.explicit_route >= 0) t.explicit_route += route_offset;
    plan.transfers.push_back(std::move(t));
  }
  return plan;
}

void assign_chunks(Plan& plan, std::int64_t max_chunks) {
  std::int64_t chunks = std::max<std::int64_t>(plan.ranks, 1);
  for (const Transfer& t : plan.transfers)
    for (support::Rational r : {t.data.begin, t.data.end}) {
      const auto lcm = support::checked_lcm(chunks, r.den());
      if (!lcm || *lcm > max_chunks)
        throw InternalError("the plan needs more than " + std::to_string(max_chunks) +
                            " chunks per buffer, which evaluation should have rejected");
      chunks = *lcm;
    }
  plan.chunks = chunks;
  for (Transfer& t : plan.transfers) {
    t.first_chunk = mul(t.data.begin, support::Rational(chunks))->num();
    t.chunk_count = mul(*sub(t.data.end, t.data.begin), support::Rational(chunks))->num();
  }
}

void coalesce(Plan& plan) {
  using Key = std::tuple<Index, Index, std::int32_t, std::int32_t, std::int32_t, bool, std::int32_t,
                         std::int32_t>;
  std::map<Key, std::vector<Index>> groups;
  for (Index t = 0; t < static_cast<Index>(plan.transfers.size()); ++t) {
    const Transfer& x = plan.transfers[static_cast<std::size_t>(t)];
    groups[{x.src, x.dst, x.stage, x.round, x.slice, x.reduce, x.explicit_route, x.avoid_set}]
        .push_back(t);
  }
  std::vector<Index> merged_into(plan.transfers.size());
  std::iota(merged_into.begin(), merged_into.end(), 0);
  for (auto& [key, members] : groups) {
    std::sort(members.begin(), members.end(), [&](Index a, Index b) {
      return plan.transfers[static_cast<std::size_t>(a)].first_chunk <
             plan.transfers[static_cast<std::size_t>(b)].first_chunk;
    });
    for (std::size_t i = 1; i < members.size(); ++i) {
      Transfer& head = plan.transfers[static_cast<std::size_t>(
          merged_into[static_cast<std::size_t>(members[i - 1])])];
      Transfer& next = plan.transfers[static_cast<std::size_t>(members[i])];
      if (head.first_chunk + head.chunk_count != next.first_chunk) continue;
      head.chunk_count += next.chunk_count;
      head.data.end = next.data.end;
      head.deps.insert(head.deps.end(), next.deps.begin(), next.deps.end());
      head.piece = std::min(head.piece, next.piece);
      merged_into[static_cast<std::size_t>(members[i])] =
          merged_into[static_cast<std::size_t>(members[i - 1])];
    }
  }
  // Keep the survivors, point dependencies at them, and restore "dependencies come first".
  std::vector<Index> survivors;
  for (Index t = 0; t < static_cast<Index>(plan.transfers.size()); ++t)
    if (merged_into[static_cast<std::size_t>(t)] == t) survivors.push_back(t);
  if (survivors.size() == plan.transfers.size()) return;
  std::vector<std::vector<Index>> deps(plan.transfers.size());
  for (Index t : survivors) {
    auto& d = deps[static_cast<std::size_t>(t)];
    for (Index x : plan.transfers[static_cast<std::size_t>(t)].deps)
      d.push_back(merged_into[static_cast<std::size_t>(x)]);
    std::sort(d.begin(), d.end());
    d.erase(std::unique(d.begin(), d.end()), d.end());
  }
  std::vector<Index> remaining(plan.transfers.size(), 0), new_index(plan.transfers.size(), -1);
  std::vector<std::vector<Index>> users(plan.transfers.size());
  for (Index t : survivors)
    for (Index d : deps[static_cast<std::size_t>(t)]) {
      users[static_cast<std::size_t>(d)].push_back(t);
      ++remaining[static_cast<std::size_t>(t)];
    }
  std::priority_queue<Index, std::vector<Index>, std::greater<>> ready;
  for (Index t : survivors)
    if (remaining[static_cast<std::size_t>(t)] == 0) ready.push(t);
  std::vector<Transfer> sorted;
  while (!ready.empty()) {
    const Index t = ready.top();
    ready.pop();
    new_index[static_cast<std::size_t>(t)] = static_cast<Index>(sorted.size());
    Transfer x = std::move(plan.transfers[static_cast<std::size_t>(t)]);
    x.deps.clear();
    for (Index d : deps[static_cast<std::size_t>(t)])
      x.deps.push_back(new_index[static_cast<std::size_t>(d)]);
    sorted.push_back(std::move(x));
    for (Index u : users[static_cast<std::size_t>(t)])
      if (--remaining[static_cast<std::size_t>(u)] == 0) ready.push(u);
  }
  // Merging only joins transfers of one round, which never wait on each other; if that ever
  // failed, a cycle would leave transfers unsorted, and the merge must not be used.
  if (sorted.size() != survivors.size())
    throw InternalError("coalesce: merged transfers form a cycle");
  plan.transfers = std::move(sorted);
}

void route(Plan& plan, const topology::Topology& topology, const ProgramText& program) {
  topology::Router router(topology);
  for (Transfer& t : plan.transfers) {
    if (t.explicit_route >= 0) {
      t.route =
          router.links_along(plan.explicit_routes[static_cast<std::size_t>(t.explicit_route)]);
      continue;
    }
    t.route = router.path(topology.gpu_of_rank(t.src), topology.gpu_of_rank(t.dst),
                          plan.avoid_sets[static_cast<std::size_t>(t.avoid_set)]);
    if (t.route.empty())
      fail_at_statement(program, plan, t.statement,
                        "no route from rank " + std::to_string(t.src) + " to rank " +
                            std::to_string(t.dst) + " in topology '" + topology.name() +
                            "' (with the links the program avoids)");
  }
}

void order(Plan& plan, const topology::Topology& topology, std::uint64_t reference_size_bytes) {
  const auto users = dependents(plan);
  const double chunk_bytes =
      static_cast<double>(reference_size_bytes) / static_cast<double>(plan.chunks);
  std::vector<double> link_free(topology.link_count(), 0), ready_at(plan.transfers.size(), 0);
  std::vector<std::size_t> waiting(plan.transfers.size());
  using Entry = std::tuple<double, std::int32_t, std::int32_t, Index>;
  std::priority_queue<Entry, std::vector<Entry>, std::greater<>> ready;
  for (std::size_t t = 0; t < plan.transfers.size(); ++t) {
    waiting[t] = plan.transfers[t].deps.size();
    if (waiting[t] == 0)
      ready.push({0.0, plan.transfers[t].stage, plan.transfers[t].round, static_cast<Index>(t)});
  }
  while (!ready.empty()) {
    const auto [ready_time, stage, round, index] = ready.top();
    ready.pop();
    Transfer& t = plan.transfers[static_cast<std::size_t>(index)];
    double alpha = 0, bottleneck = std::numeric_limits<double>::infinity(), start = ready_time;
    for (topology::LinkId l : t.route) {
      alpha += topology.link(l).alpha_us;
      bottleneck = std::min(bottleneck, topology.link(l).bw_GBps);
      start = std::max(start, link_free[l]);
    }
    const double bytes = static_cast<double>(t.chunk_count) * chunk_bytes;
    t.start_us = start;
    t.finish_us = start + alpha + bytes / (bottleneck * 1e3);
    for (topology::LinkId l : t.route)
      link_free[l] = start + bytes / (topology.link(l).bw_GBps * 1e3);
    for (Index u : users[static_cast<std::size_t>(index)]) {
      ready_at[static_cast<std::size_t>(u)] =
          std::max(ready_at[static_cast<std::size_t>(u)], t.finish_us);
      if (--waiting[static_cast<std::size_t>(u)] == 0) {
        const Transfer& x = plan.transfers[static_cast<std::size_t>(u)];
        ready.push({ready_at[static_cast<std::size_t>(u)], x.stage, x.round, u});
      }
    }
  }
}

void assign_channels(Plan& plan) {
  for (Transfer& t : plan.transfers) t.channel = (t.piece + t.slice) % plan.channels;
}

std::string check_plan(const Plan& plan, const topology::Topology* topology) {
  for (std::size_t i = 0; i < plan.transfers.size(); ++i) {
    const Transfer& t = plan.transfers[i];
    const std::string name = "transfer " + std::to_string(i) + " (rank " + std::to_string(t.src) +
                             " -> " + std::to_string(t.dst) + ")";
    if (t.src == t.dst || t.src < 0 || t.dst < 0 || t.src >= plan.ranks || t.dst >= plan.ranks)
      return name + ": bad endpoints";
    if (!(t.data.begin < t.data.end)) return name + ": empty data";
    for (std::int32_t d : t.deps)
      if (d < 0 || static_cast<std::size_t>(d) >= i) return name + ": depends on a later transfer";
    if (topology == nullptr || t.route.empty()) continue;
    topology::NodeId at = topology->gpu_of_rank(t.src);
    for (topology::LinkId l : t.route) {
      if (topology->link(l).src != at) return name + ": route is not a path";
      at = topology->link(l).dst;
    }
    if (at != topology->gpu_of_rank(t.dst)) return name + ": route ends elsewhere";
  }
  return {};
}

}  // namespace optiflow::compiler::passes
