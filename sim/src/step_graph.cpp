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

// Schedules up to this many steps run from the caches in schedule order; reordering them
// costs more than it saves.
constexpr std::size_t kWavefrontSteps = std::size_t{1} << 16;

[[noreturn]] void fail(const Schedule& schedule, const std::string& message) {
  throw support::InputError(support::SourceLocation{schedule.name, 0, 0, {}}, message);
}

// Kahn's algorithm with a FIFO queue: every step after the steps it waits for, wave by wave.
// Steps that can never run (a cycle: the run reports them as stalled) come last.
std::vector<StepId> wavefront_order(const FlatSchedule& flat) {
  const std::size_t n = flat.step_count();
  std::vector<std::int32_t> waiting(n);
  std::vector<StepId> order;
  order.reserve(n);
  for (StepId id = 0; id < n; ++id) {
    waiting[id] = flat.prerequisite_count(id);
    if (waiting[id] == 0) order.push_back(id);
  }
  auto release = [&](StepId id) {
    if (--waiting[id] == 0) order.push_back(id);
  };
  for (std::size_t head = 0; head < order.size(); ++head) {
    flat.for_each_successor(order[head], release);
  }
  if (order.size() < n)
    for (StepId id = 0; id < n; ++id)
      if (waiting[id] > 0) order.push_back(id);
  return order;
}

// The routes of a schedule's transfers, each (route, cost) computed once: a sender talks to
// few peers, so each keeps a short list of the routes it uses. In schedule order sends come
// block by block, and a block sends to one peer, nearly always on one route: a query repeating
// the previous one is answered without a search.
class RouteTable {
 public:
  RouteTable(const topology::Topology& topology, StepGraph& graph)
      : topology_(topology), router_(topology), graph_(graph), from_(topology.rank_count()) {}

  // The route of a send from `sender` to `receiver`: `given` when the schedule names one, else
  // the cheapest path; kNoRoute when there is none.
  std::int32_t find(std::int32_t sender, std::int32_t receiver,
                    std::span<const topology::LinkId> given) {
    if (previous_.route != kNoRoute && sender == previous_.sender &&
        receiver == previous_.receiver && same_links(given, previous_.given))
      return previous_.route;
    previous_ = {sender, receiver, given, lookup(sender, receiver, given)};
    return previous_.route;
  }

 private:
  std::int32_t lookup(std::int32_t sender, std::int32_t receiver,
                      std::span<const topology::LinkId> given) {
    std::vector<Known>& known = from_[static_cast<std::size_t>(sender)];
    for (const Known& k : known)
      if (k.receiver == receiver && k.given == !given.empty() &&
          (given.empty() || same_links(graph_.links(k.route), given)))
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

  // Routes are a few links: a loop costs less than a call to memcmp.
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

  const topology::Topology& topology_;
  topology::Router router_;
  StepGraph& graph_;
  std::vector<std::vector<Known>> from_;  // per sender
  struct {
    std::int32_t sender = -1, receiver = -1;
    std::span<const topology::LinkId> given;  // the schedule's, which outlives the table
    std::int32_t route = kNoRoute;
  } previous_;
};

}  // namespace

StepGraph build_step_graph(const topology::Topology& topology, const Schedule& schedule) {
  if (schedule.ranks != topology.rank_count())
    fail(schedule, "the schedule has " + std::to_string(schedule.ranks) + " ranks, topology '" +
                       topology.name() + "' has " + std::to_string(topology.rank_count()));
  const FlatSchedule flat(schedule);
  const std::size_t n = flat.step_count();
  StepGraph graph;
  // Run order: schedule order, or for large schedules a wavefront order, run_index its
  // inverse. Large graphs are built by reading the flat schedule in run order: scattered loads,
  // but each array written once, in order.
  std::vector<StepId> order;
  if (n > kWavefrontSteps) {
    order = wavefront_order(flat);
    graph.run_index.resize(n);
    for (std::size_t s = 0; s < n; ++s) graph.run_index[order[s]] = static_cast<StepIndex>(s);
  }
  auto id_at = [&](std::size_t s) { return order.empty() ? static_cast<StepId>(s) : order[s]; };
  auto run_of = [&](StepId id) {
    return order.empty() ? static_cast<StepIndex>(id) : graph.run_index[id];
  };

  graph.steps.resize(n);
  graph.prerequisites.resize(n);
  graph.dependents.reserve(n);
  graph.blocks.reserve(flat.blocks().size());
  for (const schedule::FlatBlock& block : flat.blocks())
    graph.blocks.push_back(BlockName{block.first, block.rank, block.index});
  graph.kinds.assign(flat.kinds().begin(), flat.kinds().end());
  std::size_t messages = 0;
  for (const schedule::FlatConnection& c : flat.connections()) messages += c.messages;
  graph.transfers.reserve(messages);
  graph.connections = static_cast<std::int32_t>(flat.connections().size());

  // The IR is read for sends only (it is scattered over the heap). Routes are found in run
  // order: a missing one is reported for the first send lacking it.
  RouteTable routes(topology, graph);
  for (std::size_t i = 0; i < n; ++i) {
    const StepId id = id_at(i);
    const auto s = static_cast<StepIndex>(i);
    const schedule::FlatBlock& block = flat.block_of(id);
    SimStep& step = graph.steps[i];
    graph.prerequisites[i] = flat.prerequisite_count(id);
    if (graph.prerequisites[i] == 0) graph.initially_ready.push_back(s);
    if (schedule::step_receives(flat.kind(id)))
      step.in_connection = static_cast<std::int32_t>(block.recv_connection);
    if (id + 1 < block.end) step.next_in_tb = run_of(id + 1);
    step.dependents_begin = static_cast<std::int32_t>(graph.dependents.size());
    for (StepId d : flat.dependents(id)) graph.dependents.push_back(run_of(d));
    step.dependents_end = static_cast<std::int32_t>(graph.dependents.size());
    std::uint32_t start_order = 0;
    if (const StepId receive = flat.matching_receive(id); receive != schedule::kNoStep) {
      const schedule::Step& ir = flat.step(id);
      const std::int32_t receiver = flat.rank_of(receive);
      const std::int32_t route = routes.find(block.rank, receiver, ir.route);
      if (route == kNoRoute)
        fail(schedule, "no route from rank " + std::to_string(block.rank) + " to rank " +
                           std::to_string(receiver));
      const std::int32_t distance = receiver - block.rank;
      start_order = static_cast<std::uint32_t>(distance < 0 ? distance + schedule.ranks : distance);
      step.transfer = static_cast<std::int32_t>(graph.transfers.size());
      graph.transfers.push_back(
          SimTransfer{s, run_of(receive), static_cast<double>(ir.count) / schedule.chunks,
                      static_cast<std::int32_t>(block.send_connection),
                      static_cast<std::int32_t>(flat.message_index(id)), route});
    }
    step.start_order = start_order;
    step.schedule_index = id;
  }

  std::sort(graph.initially_ready.begin(), graph.initially_ready.end(),
            [&](StepIndex a, StepIndex b) {
              return start_key(graph.step(a)) < start_key(graph.step(b));
            });
  return graph;
}

}  // namespace optiflow::sim
