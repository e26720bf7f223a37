#include "step_graph.hpp"

#include <algorithm>
#include <limits>

#include "optiflow/schedule/flat_schedule.hpp"
#include "optiflow/support/error.hpp"
#include "optiflow/topology/routing.hpp"

namespace optiflow::sim {
namespace {

using schedule::Schedule;

[[noreturn]] void fail(const Schedule& schedule, const std::string& message) {
  throw support::InputError(support::SourceLocation{schedule.name, 0, 0, {}}, message);
}

}  // namespace

StepGraph build_step_graph(const topology::Topology& topology, const Schedule& schedule) {
  if (schedule.ranks != topology.rank_count())
    fail(schedule, "the schedule has " + std::to_string(schedule.ranks) + " ranks, topology '" +
                       topology.name() + "' has " + std::to_string(topology.rank_count()));
  const schedule::FlatSchedule flat(schedule);
  StepGraph graph;
  graph.steps.resize(flat.step_count());
  graph.transfers.reserve(flat.step_count() / 2);
  graph.route_links.reserve(flat.step_count());
  for (schedule::StepId id = 0; id < flat.step_count(); ++id) {
    const schedule::FlatBlock& block = flat.block_of(id);
    const schedule::Step& ir = flat.step(id);
    SimStep& step = graph.steps[id];
    step.rank = block.rank;
    step.tb = block.index;
    step.step = flat.index_in_block(id);
    step.kind = ir.kind;
    step.prerequisites = (id > block.first ? 1 : 0) + static_cast<std::int32_t>(ir.deps.size()) +
                         (schedule::step_receives(ir.kind) ? 1 : 0);
    if (schedule::step_receives(ir.kind))
      step.in_connection = static_cast<std::int32_t>(block.recv_connection);
    if (id + 1 < block.end) step.next_in_tb = static_cast<StepIndex>(id + 1);
    step.dependents_begin = static_cast<std::int32_t>(graph.dependents.size());
    for (schedule::StepId d : flat.dependents(id))
      graph.dependents.push_back(static_cast<StepIndex>(d));
    step.dependents_end = static_cast<std::int32_t>(graph.dependents.size());
  }

  topology::Router router(topology);
  for (schedule::StepId id = 0; id < flat.step_count(); ++id) {
    const schedule::StepId receive = flat.matching_receive(id);
    if (receive == schedule::kNoStep) continue;
    const schedule::Step& ir = flat.step(id);
    const std::int32_t sender = flat.rank_of(id), receiver = flat.rank_of(receive);
    std::vector<topology::LinkId> found;
    if (ir.route.empty())
      found = router.path(topology.gpu_of_rank(sender), topology.gpu_of_rank(receiver));
    const std::span<const topology::LinkId> route = ir.route.empty() ? found : ir.route;
    if (route.empty())
      fail(schedule,
           "no route from rank " + std::to_string(sender) + " to rank " + std::to_string(receiver));
    SimTransfer transfer;
    transfer.send_step = static_cast<StepIndex>(id);
    transfer.recv_step = static_cast<StepIndex>(receive);
    transfer.fraction = static_cast<double>(ir.count) / schedule.chunks;
    transfer.connection = static_cast<std::int32_t>(flat.block_of(id).send_connection);
    transfer.message = static_cast<std::int32_t>(flat.message_index(id));
    transfer.cost = topology::route_cost(topology, route);
    transfer.route_begin = static_cast<std::int32_t>(graph.route_links.size());
    graph.route_links.insert(graph.route_links.end(), route.begin(), route.end());
    transfer.route_end = static_cast<std::int32_t>(graph.route_links.size());
    graph.steps[id].transfer = static_cast<std::int32_t>(graph.transfers.size());
    graph.steps[id].start_order = (receiver - sender + schedule.ranks) % schedule.ranks;
    graph.transfers.push_back(transfer);
  }
  graph.connections = static_cast<std::int32_t>(flat.connections().size());
  return graph;
}

}  // namespace optiflow::sim
