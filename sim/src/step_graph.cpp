#include "step_graph.hpp"

#include <algorithm>

#include "optiflow/schedule/flat_schedule.hpp"
#include "optiflow/support/error.hpp"
#include "optiflow/topology/routing.hpp"

namespace optiflow::sim {
namespace {

using schedule::FlatSchedule;
using schedule::Schedule;
using schedule::StepId;

constexpr std::int32_t kNoRoute = -1;

// Schedules up to this many steps run from the caches in schedule order; ordering them costs
// more than it saves.
constexpr std::size_t kWavefrontSteps = std::size_t{1} << 16;

[[noreturn]] void fail(const Schedule& schedule, const std::string& message) {
  throw support::InputError(support::SourceLocation{schedule.name, 0, 0, {}}, message);
}

// Kahn's algorithm with a FIFO queue over `waiting` (each step's prerequisites, consumed):
// every step after the steps it waits for, wave by wave. Steps that can never run (a cycle: the
// run reports them as stalled) come last. Small schedules keep their order.
std::vector<StepId> wavefront_order(const FlatSchedule& flat, std::vector<std::int32_t> waiting) {
  const std::size_t n = flat.step_count();
  std::vector<StepId> order;
  order.reserve(n);
  if (n <= kWavefrontSteps) {
    for (StepId id = 0; id < n; ++id) order.push_back(id);
    return order;
  }
  for (StepId id = 0; id < n; ++id)
    if (waiting[id] == 0) order.push_back(id);
  auto release = [&](StepId id) {
    if (--waiting[id] == 0) order.push_back(id);
  };
  for (std::size_t head = 0; head < order.size(); ++head) {
    const StepId id = order[head];
    if (id + 1 < flat.block_of(id).end) release(id + 1);
    for (StepId d : flat.dependents(id)) release(d);
    if (const StepId receive = flat.matching_receive(id); receive != schedule::kNoStep)
      release(receive);
  }
  if (order.size() < n)
    for (StepId id = 0; id < n; ++id)
      if (waiting[id] > 0) order.push_back(id);
  return order;
}

// The routes of a schedule's transfers, each (route, cost) computed once: a sender talks to
// few peers, so each keeps a short list of the routes it uses.
class RouteTable {
 public:
  RouteTable(const topology::Topology& topology, StepGraph& graph)
      : topology_(topology), router_(topology), graph_(graph), from_(topology.rank_count()) {}

  // The route of a send from `sender` to `receiver`: `given` when the schedule names one, else
  // the cheapest path; kNoRoute when there is none.
  std::int32_t find(std::int32_t sender, std::int32_t receiver,
                    std::span<const topology::LinkId> given) {
    std::vector<Known>& known = from_[static_cast<std::size_t>(sender)];
    for (const Known& k : known)
      if (k.receiver == receiver && k.given == !given.empty() &&
          (given.empty() || same_links(links_of(k.route), given)))
        return k.route;
    std::vector<topology::LinkId> found;
    if (given.empty())
      found = router_.path(topology_.gpu_of_rank(sender), topology_.gpu_of_rank(receiver));
    const std::span<const topology::LinkId> route = given.empty() ? found : given;
    if (route.empty()) return kNoRoute;
    SimRoute r;
    r.links_begin = static_cast<std::int32_t>(graph_.route_links.size());
    graph_.route_links.insert(graph_.route_links.end(), route.begin(), route.end());
    r.links_end = static_cast<std::int32_t>(graph_.route_links.size());
    r.cost = topology::route_cost(topology_, route);
    const auto index = static_cast<std::int32_t>(graph_.routes.size());
    graph_.routes.push_back(r);
    known.push_back(Known{receiver, !given.empty(), index});
    return index;
  }

 private:
  static bool same_links(std::span<const topology::LinkId> a, std::span<const topology::LinkId> b) {
    if (a.size() != b.size()) return false;
    for (std::size_t i = 0; i < a.size(); ++i)
      if (a[i] != b[i]) return false;
    return true;
  }
  struct Known {
    std::int32_t receiver;
    bool given;
    std::int32_t route;
  };
  std::span<const topology::LinkId> links_of(std::int32_t route) const {
    const SimRoute& r = graph_.routes[static_cast<std::size_t>(route)];
    return std::span<const topology::LinkId>(graph_.route_links)
        .subspan(static_cast<std::size_t>(r.links_begin),
                 static_cast<std::size_t>(r.links_end - r.links_begin));
  }

  const topology::Topology& topology_;
  topology::Router router_;
  StepGraph& graph_;
  std::vector<std::vector<Known>> from_;  // per sender
};

}  // namespace

StepGraph build_step_graph(const topology::Topology& topology, const Schedule& schedule) {
  if (schedule.ranks != topology.rank_count())
    fail(schedule, "the schedule has " + std::to_string(schedule.ranks) + " ranks, topology '" +
                       topology.name() + "' has " + std::to_string(topology.rank_count()));
  const FlatSchedule flat(schedule);
  const std::size_t n = flat.step_count();
  StepGraph graph;

  // What the graph needs of each step's IR, read once in schedule order (the IR is scattered
  // over the heap); routes in that order, so that a missing one is reported for the first send
  // lacking it.
  std::vector<std::int32_t> prerequisites(n), count(n), route_of(n, kNoRoute);
  std::vector<schedule::StepKind> kind(n);
  RouteTable routes(topology, graph);
  // A block sends to one peer, nearly always on one route: a send naming the same route as the
  // block's previous send (or, like it, none) takes that one without a search.
  struct {
    schedule::BlockId block = schedule::kNone;
    std::span<const topology::LinkId> given;
    std::int32_t route = kNoRoute;
  } previous;
  for (StepId id = 0; id < n; ++id) {
    const schedule::Step& ir = flat.step(id);
    kind[id] = ir.kind;
    count[id] = ir.count;
    prerequisites[id] = (id > flat.block_of(id).first ? 1 : 0) +
                        static_cast<std::int32_t>(ir.deps.size()) +
                        (schedule::step_receives(ir.kind) ? 1 : 0);
    const StepId receive = flat.matching_receive(id);
    if (receive == schedule::kNoStep) continue;
    if (flat.block_id(id) == previous.block &&
        std::equal(ir.route.begin(), ir.route.end(), previous.given.begin(),
                   previous.given.end())) {
      route_of[id] = previous.route;
      continue;
    }
    const std::int32_t sender = flat.rank_of(id), receiver = flat.rank_of(receive);
    route_of[id] = routes.find(sender, receiver, ir.route);
    previous = {flat.block_id(id), ir.route, route_of[id]};
    if (route_of[id] == kNoRoute)
      fail(schedule,
           "no route from rank " + std::to_string(sender) + " to rank " + std::to_string(receiver));
  }

  const std::vector<StepId> order = wavefront_order(flat, prerequisites);
  graph.run_index.resize(n);
  std::vector<std::int32_t> transfer_of(n, -1);
  std::int32_t transfers = 0;
  for (std::size_t s = 0; s < n; ++s) {
    graph.run_index[order[s]] = static_cast<StepIndex>(s);
    if (route_of[order[s]] != kNoRoute) transfer_of[order[s]] = transfers++;
  }
  auto run_index = [&](StepId id) { return graph.run_index[id]; };

  graph.steps.resize(n);
  graph.names.resize(n);
  graph.start_key.resize(n);
  graph.dependents.reserve(n);
  graph.transfers.resize(static_cast<std::size_t>(transfers));
  for (StepId id = 0; id < n; ++id) {
    const auto s = static_cast<std::size_t>(run_index(id));
    const schedule::FlatBlock& block = flat.block_of(id);
    SimStep& step = graph.steps[s];
    graph.names[s] = StepName{block.rank, block.index, flat.index_in_block(id), kind[id]};
    if (schedule::step_receives(kind[id]))
      step.in_connection = static_cast<std::int32_t>(block.recv_connection);
    if (id + 1 < block.end) step.next_in_tb = run_index(id + 1);
    step.dependents_begin = static_cast<std::int32_t>(graph.dependents.size());
    for (StepId d : flat.dependents(id)) graph.dependents.push_back(run_index(d));
    step.dependents_end = static_cast<std::int32_t>(graph.dependents.size());
    std::uint64_t start_order = 0;
    if (route_of[id] != kNoRoute) {
      const StepId receive = flat.matching_receive(id);
      start_order = static_cast<std::uint64_t>(
          (flat.rank_of(receive) - block.rank + schedule.ranks) % schedule.ranks);
      step.transfer = transfer_of[id];
      SimTransfer& transfer = graph.transfers[static_cast<std::size_t>(step.transfer)];
      transfer.send_step = static_cast<StepIndex>(s);
      transfer.recv_step = run_index(receive);
      transfer.fraction = static_cast<double>(count[id]) / schedule.chunks;
      transfer.connection = static_cast<std::int32_t>(block.send_connection);
      transfer.message = static_cast<std::int32_t>(flat.message_index(id));
      transfer.route = route_of[id];
    }
    graph.start_key[s] = start_order << 32 | id;
  }
  graph.prerequisites.resize(n);
  for (StepId id = 0; id < n; ++id)
    graph.prerequisites[static_cast<std::size_t>(run_index(id))] = prerequisites[id];
  for (std::size_t s = 0; s < n; ++s)
    if (graph.prerequisites[s] == 0) graph.initially_ready.push_back(static_cast<StepIndex>(s));
  std::sort(graph.initially_ready.begin(), graph.initially_ready.end(),
            [&](StepIndex a, StepIndex b) {
              return graph.start_key[static_cast<std::size_t>(a)] <
                     graph.start_key[static_cast<std::size_t>(b)];
            });
  graph.connections = static_cast<std::int32_t>(flat.connections().size());
  return graph;
}

}  // namespace optiflow::sim
