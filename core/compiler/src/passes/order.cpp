// The order pass: each transfer's estimated start and finish, from list scheduling on the
// simulator's alpha-beta links at a reference size.
#include <algorithm>
#include <functional>
#include <queue>
#include <tuple>

#include "optiflow/support/units.hpp"
#include "pass_table.hpp"

namespace optiflow::compiler::passes {
namespace {

// What list scheduling reads and updates of a transfer, in 32 bytes: it visits transfers in
// time order, all over the plan, so each visit should cost one cache miss, not one per array.
struct Job {
  double ready_at = 0;
  std::int64_t chunks;
  std::int32_t stage, round, route;
  std::uint32_t waiting;
};

using ReadyEntry = std::tuple<double, std::int32_t, std::int32_t, Index>;
using ReadyQueue = std::priority_queue<ReadyEntry, std::vector<ReadyEntry>, std::greater<>>;

// Every transfer's job; those that wait for nothing go into `ready`. Paced: slice k of a
// rank's own data starts no earlier than k * pace_us.
std::vector<Job> initial_jobs(const Plan& plan, double pace_us, ReadyQueue& ready) {
  std::vector<Job> jobs(plan.transfers.size());
  for (std::size_t t = 0; t < jobs.size(); ++t) {
    const Transfer& x = plan.transfers[t];
    jobs[t] = Job{.chunks = x.chunk_count,
                  .stage = x.stage,
                  .round = x.round,
                  .route = x.route,
                  .waiting = static_cast<std::uint32_t>(plan.deps[t].size())};
    const bool paced = jobs[t].waiting == 0 && x.statement >= 0 &&
                       plan.statements[static_cast<std::size_t>(x.statement)].paced;
    jobs[t].ready_at = paced ? pace_us * x.slice : 0.0;
    if (jobs[t].waiting == 0)
      ready.push({jobs[t].ready_at, x.stage, x.round, static_cast<Index>(t)});
  }
  return jobs;
}

// List scheduling on the simulator's alpha-beta links, at one size: ready transfers in order
// of (ready time, stage, round, index) take their links as FIFO servers. Returns each
// transfer's (start, finish).
std::vector<std::pair<double, double>> list_schedule(const Plan& plan,
                                                     const topology::Topology& topology,
                                                     topology::Protocol protocol, double size_bytes,
                                                     double pace_us = 0) {
  const IndexLists users = dependents(plan);
  const std::vector<topology::TransferCost> costs = route_costs(plan, topology, protocol);
  const double chunk_bytes = size_bytes / static_cast<double>(plan.chunks);
  ReadyQueue ready;
  std::vector<Job> jobs = initial_jobs(plan, pace_us, ready);
  topology::FifoLinks links(topology);                                  // the simulator's model
  std::vector<std::pair<double, double>> times(plan.transfers.size());  // start, finish
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

void order_pass(CompileState& state) {
  order(state.plan, state.topology, state.options.reference_size_bytes);
}

}  // namespace optiflow::compiler::passes
