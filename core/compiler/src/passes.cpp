#include "passes.hpp"

#include <algorithm>
#include <array>
#include <limits>
#include <numeric>
#include <optional>
#include <queue>
#include <tuple>
#include <unordered_map>

#include "optiflow/dsl/parser.hpp"
#include "optiflow/support/units.hpp"
#include "optiflow/topology/link_cost.hpp"
#include "optiflow/topology/routing.hpp"
#include "radix_sort.hpp"

namespace optiflow::compiler::passes {
namespace {

using Index = std::int32_t;

std::size_t at(Index i) {
  return static_cast<std::size_t>(i);
}

support::Rational point(const Interval& i, std::int64_t k, std::int64_t parts) {
  // begin + (end - begin) * k / parts; every value here is a small fraction of the buffer.
  return *add(i.begin, *mul(*sub(i.end, i.begin), *support::Rational::make(k, parts)));
}

// Everything of `plan` but its transfers and their dependencies.
Plan empty_like(const Plan& plan) {
  Plan out;
  out.ranks = plan.ranks;
  out.pipeline = plan.pipeline;
  out.channels = plan.channels;
  out.chunks = plan.chunks;
  out.explicit_routes = plan.explicit_routes;
  out.avoid_sets = plan.avoid_sets;
  out.routes = plan.routes;
  out.statements = plan.statements;
  return out;
}

// --- All-Reduce: each root of the All-Gather waits for the reductions into its data ---------

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

// --- coalesce ------------------------------------------------------------------------------

// Transfers that may become one message: same ranks, step, round, slice, kind and route.
struct MergeKey {
  std::array<std::int32_t, 8> group;
  std::int64_t first_chunk;
  Index index;
  auto operator<=>(const MergeKey&) const = default;
};

MergeKey merge_key(const Transfer& x, Index index) {
  return MergeKey{
      {x.src, x.dst, x.stage, x.round, x.slice, x.reduce ? 1 : 0, x.explicit_route, x.avoid_set},
      x.first_chunk,
      index};
}

// A hash of the merge group, so that candidates are found by sorting 16-byte pairs: most
// transfers share their group with no other.
std::uint64_t group_hash(const MergeKey& key) {
  std::uint64_t h = 0x9e3779b97f4a7c15u;
  for (std::int32_t field : key.group) {  // splitmix64's finaliser over each field
    h ^= static_cast<std::uint32_t>(field);
    h = (h ^ (h >> 30)) * 0xbf58476d1ce4e5b9u;
    h = (h ^ (h >> 27)) * 0x94d049bb133111ebu;
    h ^= h >> 31;
  }
  return h;
}

// Merges each transfer of `run` (sorted) that continues its group's previous message without
// a gap into it; returns whether any did.
bool merge_contiguous(Plan& plan, const std::vector<MergeKey>& run,
                      std::vector<Index>& merged_into) {
  bool merged = false;
  for (std::size_t i = 1; i < run.size(); ++i) {
    if (run[i - 1].group != run[i].group) continue;
    const Index head_index = merged_into[at(run[i - 1].index)];
    Transfer& head = plan.transfers[at(head_index)];
    const Transfer& tail = plan.transfers[at(run[i].index)];
    if (head.first_chunk + head.chunk_count != tail.first_chunk) continue;
    head.chunk_count += tail.chunk_count;
    head.data.end = tail.data.end;
    head.piece = std::min(head.piece, tail.piece);
    merged_into[at(run[i].index)] = head_index;
    merged = true;
  }
  return merged;
}

// Orders `survivors` so that dependencies come first again (lowest index first among the
// ready), mapping each dependency through `merged_into`.
void sort_survivors(Plan& plan, const std::vector<Index>& merged_into,
                    const std::vector<std::vector<Index>>& members) {
  const std::size_t n = plan.transfers.size();
  std::vector<std::vector<Index>> deps(n);
  std::vector<std::uint32_t> user_counts(n, 0);
  for (std::size_t s = 0; s < n; ++s) {
    if (merged_into[s] != static_cast<Index>(s)) continue;
    auto& d = deps[s];
    for (Index m : members[s])
      for (Index x : plan.deps[at(m)]) d.push_back(merged_into[at(x)]);
    std::sort(d.begin(), d.end());
    d.erase(std::unique(d.begin(), d.end()), d.end());
    for (Index x : d) ++user_counts[at(x)];
  }
  const IndexLists users = gather_lists(user_counts, [&](auto place) {
    for (std::size_t s = 0; s < n; ++s)
      for (Index x : deps[s]) place(at(x), static_cast<Index>(s));
  });
  std::vector<std::size_t> remaining(n, 0);
  std::priority_queue<Index, std::vector<Index>, std::greater<>> ready;
  std::size_t survivors = 0;
  for (std::size_t s = 0; s < n; ++s) {
    if (merged_into[s] != static_cast<Index>(s)) continue;
    ++survivors;
    remaining[s] = deps[s].size();
    if (remaining[s] == 0) ready.push(static_cast<Index>(s));
  }
  Plan sorted = empty_like(plan);
  std::vector<Index> new_index(n, -1), mapped;
  while (!ready.empty()) {
    const Index t = ready.top();
    ready.pop();
    new_index[at(t)] = static_cast<Index>(sorted.transfers.size());
    mapped.clear();
    for (Index d : deps[at(t)]) mapped.push_back(new_index[at(d)]);
    std::sort(mapped.begin(), mapped.end());
    sorted.add(plan.transfers[at(t)], mapped);
    for (Index u : users[at(t)])
      if (--remaining[at(u)] == 0) ready.push(u);
  }
  // Merging only joins transfers of one round, which never wait on each other; if that ever
  // failed, a cycle would leave transfers unsorted.
  if (sorted.transfers.size() != survivors)
    throw InternalError("coalesce: merged transfers form a cycle");
  plan = std::move(sorted);
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

IndexLists dependents(const Plan& plan) {
  std::vector<std::uint32_t> counts(plan.transfers.size(), 0);
  for (std::size_t t = 0; t < plan.transfers.size(); ++t)
    for (Index d : plan.deps[t]) ++counts[at(d)];
  return gather_lists(counts, [&](auto place) {
    for (std::size_t t = 0; t < plan.transfers.size(); ++t)
      for (Index d : plan.deps[t]) place(at(d), static_cast<Index>(t));
  });
}

void pipeline(Plan& plan) {
  const std::int64_t k = plan.pipeline;
  if (k <= 1) return;
  Plan sliced = empty_like(plan);
  sliced.transfers.reserve(plan.transfers.size() * static_cast<std::size_t>(k));
  std::vector<Index> first_slice(plan.transfers.size()), deps;
  for (std::size_t t = 0; t < plan.transfers.size(); ++t) {
    const Transfer& whole = plan.transfers[t];
    first_slice[t] = static_cast<Index>(sliced.transfers.size());
    for (std::int64_t s = 0; s < k; ++s) {
      Transfer part = whole;
      part.data = Interval{point(whole.data, s, k), point(whole.data, s + 1, k)};
      part.slice = static_cast<std::int32_t>(s);
      // A dependency's slices lie in data order, so the ones overlapping this slice are a run.
      deps.clear();
      for (Index d : plan.deps[t]) {
        const auto slices = std::span(sliced.transfers).subspan(at(first_slice[at(d)]), at(k));
        const auto first = std::partition_point(slices.begin(), slices.end(), [&](const auto& x) {
          return x.data.end <= part.data.begin;
        });
        for (auto x = first; x != slices.end() && x->data.begin < part.data.end; ++x)
          deps.push_back(first_slice[at(d)] + static_cast<Index>(x - slices.begin()));
      }
      sliced.add(std::move(part), deps);
    }
  }
  plan = std::move(sliced);
}

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

void assign_chunks(Plan& plan, std::int64_t max_chunks) {
  std::int64_t chunks = std::max<std::int64_t>(plan.ranks, 1);
  for (const Transfer& t : plan.transfers)
    for (support::Rational r : {t.data.begin, t.data.end}) {
      if (chunks % r.den() == 0) continue;  // the common case, without a gcd
      const auto lcm = support::checked_lcm(chunks, r.den());
      if (!lcm || *lcm > max_chunks)
        throw InternalError("the plan needs more than " + std::to_string(max_chunks) +
                            " chunks per buffer, which evaluation should have rejected");
      chunks = *lcm;
    }
  plan.chunks = chunks;
  // Every denominator divides `chunks`, so these are exact.
  auto in_chunks = [chunks](support::Rational r) { return r.num() * (chunks / r.den()); };
  for (Transfer& t : plan.transfers) {
    t.first_chunk = in_chunks(t.data.begin);
    t.chunk_count = in_chunks(t.data.end) - t.first_chunk;
  }
}

void coalesce(Plan& plan) {
  const auto n = static_cast<Index>(plan.transfers.size());
  std::vector<KeyedIndex> hashed(at(n));
  for (Index t = 0; t < n; ++t)
    hashed[at(t)] = {group_hash(merge_key(plan.transfers[at(t)], t)), t};
  radix_sort(hashed);
  std::vector<Index> merged_into(at(n));
  std::iota(merged_into.begin(), merged_into.end(), 0);
  bool merged = false;
  std::vector<MergeKey> run;
  for (std::size_t i = 0, j = 0; i < hashed.size(); i = j) {
    for (j = i + 1; j < hashed.size() && hashed[j].key == hashed[i].key;) ++j;
    if (j - i == 1) continue;
    run.clear();
    for (std::size_t k = i; k < j; ++k)
      run.push_back(merge_key(plan.transfers[at(hashed[k].index)], hashed[k].index));
    std::sort(run.begin(), run.end());
    merged = merge_contiguous(plan, run, merged_into) || merged;
  }
  if (!merged) return;
  hashed = {};
  std::vector<std::vector<Index>> members(at(n));
  for (Index t = 0; t < n; ++t) members[at(merged_into[at(t)])].push_back(t);
  sort_survivors(plan, merged_into, members);
}

void route(Plan& plan, const topology::Topology& topology, const ProgramText& program) {
  topology::Router router(topology);
  plan.routes.clear();
  std::vector<Index> explicit_ids(plan.explicit_routes.size(), -1);
  std::unordered_map<std::uint64_t, Index> default_ids;
  auto store = [&](std::vector<topology::LinkId> links) {
    plan.routes.push_back(std::move(links));
    return static_cast<Index>(plan.routes.size() - 1);
  };
  for (Transfer& t : plan.transfers) {
    if (t.explicit_route >= 0) {
      Index& id = explicit_ids[at(t.explicit_route)];
      if (id < 0) id = store(router.links_along(plan.explicit_routes[at(t.explicit_route)]));
      t.route = id;
      continue;
    }
    const auto ranks = static_cast<std::uint64_t>(plan.ranks);
    const std::uint64_t key =
        (static_cast<std::uint64_t>(t.avoid_set) * ranks + static_cast<std::uint64_t>(t.src)) *
            ranks +
        static_cast<std::uint64_t>(t.dst);
    const auto [it, inserted] = default_ids.try_emplace(key, -1);
    if (inserted) {
      auto links = router.path(topology.gpu_of_rank(t.src), topology.gpu_of_rank(t.dst),
                               plan.avoid_sets[at(t.avoid_set)]);
      if (links.empty())
        fail_at_statement(program, plan, t.statement,
                          "no route from rank " + std::to_string(t.src) + " to rank " +
                              std::to_string(t.dst) + " in topology '" + topology.name() +
                              "' (with the links the program avoids)");
      it->second = store(std::move(links));
    }
    t.route = it->second;
  }
}

namespace {

// What list scheduling reads and updates of a transfer, in 32 bytes: it visits transfers in
// time order, all over the plan, so each visit should cost one cache miss, not one per array.
struct Job {
  double ready_at = 0;
  std::int64_t chunks;
  std::int32_t stage, round, route;
  std::uint32_t waiting;
};

std::vector<topology::TransferCost> route_costs(const Plan& plan,
                                                const topology::Topology& topology,
                                                topology::Protocol protocol) {
  std::vector<topology::TransferCost> costs;
  costs.reserve(plan.routes.size());
  for (const auto& route : plan.routes)
    costs.push_back(topology::transfer_cost(topology::route_cost(topology, route),
                                            topology::protocol_costs(protocol)));
  return costs;
}

}  // namespace

namespace {

// List scheduling on the simulator's alpha-beta links, at one size: ready transfers in order
// of (ready time, stage, round, index) take their links as FIFO servers. Returns each
// transfer's (start, finish).
std::vector<std::pair<double, double>> list_schedule(const Plan& plan,
                                                     const topology::Topology& topology,
                                                     topology::Protocol protocol, double size_bytes,
                                                     double pace_us = 0) {
  const std::size_t n = plan.transfers.size();
  const IndexLists users = dependents(plan);
  const std::vector<topology::TransferCost> costs = route_costs(plan, topology, protocol);
  const double chunk_bytes = size_bytes / static_cast<double>(plan.chunks);
  std::vector<Job> jobs(n);
  using Entry = std::tuple<double, std::int32_t, std::int32_t, Index>;
  std::priority_queue<Entry, std::vector<Entry>, std::greater<>> ready;
  for (std::size_t t = 0; t < n; ++t) {
    const Transfer& x = plan.transfers[t];
    jobs[t] = Job{.chunks = x.chunk_count,
                  .stage = x.stage,
                  .round = x.round,
                  .route = x.route,
                  .waiting = static_cast<std::uint32_t>(plan.deps[t].size())};
    // Paced: slice k of a rank's own data starts no earlier than k * pace_us.
    const bool paced = jobs[t].waiting == 0 && x.statement >= 0 &&
                       plan.statements[static_cast<std::size_t>(x.statement)].paced;
    jobs[t].ready_at = paced ? pace_us * x.slice : 0.0;
    if (jobs[t].waiting == 0)
      ready.push({jobs[t].ready_at, x.stage, x.round, static_cast<Index>(t)});
  }
  topology::FifoLinks links(topology);              // the simulator's alpha-beta model
  std::vector<std::pair<double, double>> times(n);  // start, finish
  while (!ready.empty()) {
    const Index index = std::get<3>(ready.top());
    ready.pop();
    // The next transfer to schedule is known: start loading it while this one is handled.
    if (!ready.empty()) {
      __builtin_prefetch(&jobs[at(std::get<3>(ready.top()))]);
      users.prefetch(at(std::get<3>(ready.top())));
    }
    const Job& job = jobs[at(index)];
    const auto waiting_for_it = users[at(index)];
    for (Index u : waiting_for_it) __builtin_prefetch(&jobs[at(u)]);
    const double bytes = static_cast<double>(job.chunks) * chunk_bytes;
    const auto booking =
        links.book(plan.routes[at(job.route)], costs[at(job.route)], bytes, job.ready_at);
    const double finish = booking.arrival_us;
    times[at(index)] = {booking.start_us, finish};
    for (Index u : waiting_for_it) {
      Job& user = jobs[at(u)];
      user.ready_at = std::max(user.ready_at, finish);
      if (--user.waiting == 0) ready.push({user.ready_at, user.stage, user.round, u});
    }
  }
  return times;
}

// With no data the links never queue, so the list schedule is the longest chain of transfer
// latencies, plus the launch cost: one pass in index order (every dependency has a lower
// index).
double latency_us(const Plan& plan, const topology::Topology& topology,
                  topology::Protocol protocol) {
  const std::vector<topology::TransferCost> costs = route_costs(plan, topology, protocol);
  std::vector<double> done(plan.transfers.size());
  double last = 0;
  for (std::size_t t = 0; t < plan.transfers.size(); ++t) {
    double ready = 0;
    for (std::int32_t d : plan.deps[t]) ready = std::max(ready, done[at(d)]);
    done[t] = ready + costs[at(plan.transfers[t].route)].latency_us;
    last = std::max(last, done[t]);
  }
  return topology::protocol_costs(protocol).launch_us + last;
}

}  // namespace

namespace {

// The busiest link's time at `size_bytes`: no schedule of this plan is faster.
double link_load_bound_us(const Plan& plan, const topology::Topology& topology, double size_bytes) {
  std::vector<double> bytes(topology.link_count(), 0);
  const double chunk_bytes = size_bytes / static_cast<double>(plan.chunks);
  for (const Transfer& t : plan.transfers)
    for (topology::LinkId l : plan.routes[at(t.route)])
      bytes[l] += static_cast<double>(t.chunk_count) * chunk_bytes;
  double worst = 0;
  for (topology::LinkId l = 0; l < bytes.size(); ++l)
    if (bytes[l] > 0)
      worst = std::max(worst, bytes[l] / support::bytes_per_us(topology.link(l).bw_GBps));
  return worst;
}

double makespan(const std::vector<std::pair<double, double>>& times) {
  double last = 0;
  for (const auto& [start, finish] : times) last = std::max(last, finish);
  return last;
}

}  // namespace

void order(Plan& plan, const topology::Topology& topology, std::uint64_t reference_size_bytes) {
  const auto protocol = plan.protocol.value_or(topology::Protocol::simple);
  const auto size = static_cast<double>(reference_size_bytes);
  auto times = list_schedule(plan, topology, protocol, size);
  // Greedy list scheduling sends every rank's own data at once, so what it forwards waits
  // behind it. In tree packings, where every link is close to busy, pacing each rank's own
  // slices at the rate the busiest link allows leaves room for forwarding; kept where it is
  // faster.
  const bool packing = std::any_of(plan.statements.begin(), plan.statements.end(),
                                   [](const StatementPos& s) { return s.paced; });
  std::int32_t slices = 0;
  for (const Transfer& t : plan.transfers) slices = std::max(slices, t.slice + 1);
  if (packing && slices > 1) {
    auto paced = list_schedule(plan, topology, protocol, size,
                               link_load_bound_us(plan, topology, size) / slices);
    if (makespan(paced) < makespan(times)) times = std::move(paced);
  }
  for (std::size_t t = 0; t < plan.transfers.size(); ++t)
    std::tie(plan.transfers[t].start_us, plan.transfers[t].finish_us) = times[t];
}

std::vector<std::pair<std::uint64_t, topology::Protocol>> choose_protocols(
    const Plan& plan, const topology::Topology& topology, std::uint64_t reference_size_bytes) {
  if (plan.protocol) return {{1, *plan.protocol}};
  // Time is close to affine in size for a fixed schedule (NCCL's tuner makes the same
  // assumption): the latency with no data, plus a slope. The order pass measured Simple's at
  // the reference size; the other protocols move data at their share of the bandwidth (one
  // share for every hop class in the protocol table).
  double last_us = 0;
  for (const Transfer& t : plan.transfers) last_us = std::max(last_us, t.finish_us);
  const double simple_us = topology::protocol_costs(topology::Protocol::simple).launch_us + last_us;
  const double simple_latency = latency_us(plan, topology, topology::Protocol::simple);
  const double simple_slope =
      std::max(0.0, simple_us - simple_latency) / static_cast<double>(reference_size_bytes);
  struct Line {
    topology::Protocol protocol;
    double latency_us, slope;
  };
  std::vector<Line> lines;  // the protocols NCCL enables on this topology
  for (topology::Protocol protocol : topology::kProtocols)
    if (topology::protocol_enabled(topology, protocol))
      lines.push_back(
          {protocol, latency_us(plan, topology, protocol),
           simple_slope / topology::protocol_costs(protocol).share(topology::HopClass::nvlink)});
  // Powers of two up to 2^40: the sizes collectives are measured at.
  std::vector<std::pair<std::uint64_t, topology::Protocol>> per_size;
  for (int k = 0; k <= 40; ++k) {
    const double size = static_cast<double>(std::uint64_t{1} << k);
    const auto cost = [&](const Line& line) { return line.latency_us + line.slope * size; };
    const Line* best = &lines.back();  // Simple, which wins ties
    for (const Line& line : lines)
      if (cost(line) < cost(*best)) best = &line;
    per_size.emplace_back(std::uint64_t{1} << k, best->protocol);
  }
  return per_size;
}

void assign_channels(Plan& plan) {
  for (Transfer& t : plan.transfers) t.channel = (t.piece + t.slice) % plan.channels;
}

namespace {

// Each stored route's first and last node, or nullopt when it is not a path of links.
std::vector<std::optional<std::pair<topology::NodeId, topology::NodeId>>> route_ends(
    const Plan& plan, const topology::Topology& topology) {
  std::vector<std::optional<std::pair<topology::NodeId, topology::NodeId>>> ends;
  for (const auto& links : plan.routes) {
    std::optional<std::pair<topology::NodeId, topology::NodeId>> end;
    if (!links.empty())
      end.emplace(topology.link(links.front()).src, topology.link(links.front()).src);
    for (topology::LinkId l : links) {
      if (!end || topology.link(l).src != end->second) {
        end.reset();
        break;
      }
      end->second = topology.link(l).dst;
    }
    ends.push_back(end);
  }
  return ends;
}

}  // namespace

std::string check_plan(const Plan& plan, const topology::Topology* topology) {
  if (plan.deps.size() != plan.transfers.size())
    return std::to_string(plan.deps.size()) + " dependency lists for " +
           std::to_string(plan.transfers.size()) + " transfers";
  const auto ends =
      topology ? route_ends(plan, *topology) : decltype(route_ends(plan, *topology)){};
  for (std::size_t i = 0; i < plan.transfers.size(); ++i) {
    const Transfer& t = plan.transfers[i];
    auto problem = [&](const std::string& what) {
      return "transfer " + std::to_string(i) + " (rank " + std::to_string(t.src) + " -> " +
             std::to_string(t.dst) + "): " + what;
    };
    if (t.src == t.dst || t.src < 0 || t.dst < 0 || t.src >= plan.ranks || t.dst >= plan.ranks)
      return problem("bad endpoints");
    if (!(t.data.begin < t.data.end)) return problem("empty data");
    for (std::int32_t d : plan.deps[i])
      if (d < 0 || at(d) >= i) return problem("depends on a later transfer");
    if (topology == nullptr) continue;
    if (t.route < 0 || at(t.route) >= plan.routes.size()) return problem("no route");
    const auto& end = ends[at(t.route)];
    if (!end) return problem("route is not a path");
    if (end->first != topology->gpu_of_rank(t.src) || end->second != topology->gpu_of_rank(t.dst))
      return problem("route ends elsewhere");
  }
  return {};
}

}  // namespace optiflow::compiler::passes
