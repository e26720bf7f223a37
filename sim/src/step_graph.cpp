#include "step_graph.hpp"

#include <algorithm>
#include <limits>
#include <map>
#include <tuple>

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
  StepGraph graph;
  // Global index of the first step of every (rank, tb).
  std::vector<std::vector<StepIndex>> first(schedule.programs.size());
  for (std::size_t r = 0; r < schedule.programs.size(); ++r)
    for (const auto& tb : schedule.programs[r].tbs) {
      first[r].push_back(static_cast<StepIndex>(graph.steps.size()));
      for (std::size_t s = 0; s < tb.steps.size(); ++s) {
        SimStep step;
        step.rank = static_cast<std::int32_t>(r);
        step.tb = static_cast<std::int32_t>(first[r].size() - 1);
        step.step = static_cast<std::int32_t>(s);
        step.kind = tb.steps[s].kind;
        step.prerequisites = (s > 0 ? 1 : 0) + static_cast<std::int32_t>(tb.steps[s].deps.size()) +
                             (schedule::step_receives(step.kind) ? 1 : 0);
        if (s + 1 < tb.steps.size())
          step.next_in_tb = static_cast<StepIndex>(graph.steps.size() + 1);
        graph.steps.push_back(step);
      }
    }

  // Dependents, grouped by the step they wait for.
  std::vector<std::vector<StepIndex>> waiting(graph.steps.size());
  for (std::size_t r = 0; r < schedule.programs.size(); ++r)
    for (std::size_t t = 0; t < schedule.programs[r].tbs.size(); ++t)
      for (std::size_t s = 0; s < schedule.programs[r].tbs[t].steps.size(); ++s)
        for (const schedule::StepRef& d : schedule.programs[r].tbs[t].steps[s].deps)
          waiting[static_cast<std::size_t>(first[r][static_cast<std::size_t>(d.tb)] + d.step)]
              .push_back(first[r][t] + static_cast<StepIndex>(s));
  for (std::size_t i = 0; i < graph.steps.size(); ++i) {
    graph.steps[i].dependents_begin = static_cast<std::int32_t>(graph.dependents.size());
    graph.dependents.insert(graph.dependents.end(), waiting[i].begin(), waiting[i].end());
    graph.steps[i].dependents_end = static_cast<std::int32_t>(graph.dependents.size());
  }

  // Sends and receives of each connection (sender, receiver, channel), in block order.
  using Connection = std::tuple<std::int32_t, std::int32_t, std::int32_t>;
  std::map<Connection, std::pair<std::vector<StepIndex>, std::vector<StepIndex>>> connections;
  for (std::size_t r = 0; r < schedule.programs.size(); ++r)
    for (std::size_t t = 0; t < schedule.programs[r].tbs.size(); ++t) {
      const schedule::ThreadBlock& tb = schedule.programs[r].tbs[t];
      for (std::size_t s = 0; s < tb.steps.size(); ++s) {
        const StepIndex index = first[r][t] + static_cast<StepIndex>(s);
        const auto rank = static_cast<std::int32_t>(r);
        if (schedule::step_sends(tb.steps[s].kind))
          connections[{rank, tb.send_peer, tb.channel}].first.push_back(index);
        if (schedule::step_receives(tb.steps[s].kind))
          connections[{tb.recv_peer, rank, tb.channel}].second.push_back(index);
      }
    }

  topology::Router router(topology);
  for (const auto& [key, ends] : connections) {
    const auto& [sender, receiver, channel] = key;
    if (ends.first.size() != ends.second.size())
      fail(schedule, "rank " + std::to_string(sender) + " sends " +
                         std::to_string(ends.first.size()) + " messages to rank " +
                         std::to_string(receiver) + " on channel " + std::to_string(channel) +
                         ", which receives " + std::to_string(ends.second.size()));
    for (std::size_t k = 0; k < ends.first.size(); ++k) {
      SimStep& send = graph.steps[static_cast<std::size_t>(ends.first[k])];
      const schedule::Step& ir = schedule.programs[static_cast<std::size_t>(send.rank)]
                                     .tbs[static_cast<std::size_t>(send.tb)]
                                     .steps[static_cast<std::size_t>(send.step)];
      std::vector<topology::LinkId> route = ir.route;
      if (route.empty())
        route = router.path(topology.gpu_of_rank(sender), topology.gpu_of_rank(receiver));
      if (route.empty())
        fail(schedule, "no route from rank " + std::to_string(sender) + " to rank " +
                           std::to_string(receiver));
      SimTransfer transfer;
      transfer.send_step = ends.first[k];
      transfer.recv_step = ends.second[k];
      transfer.fraction = static_cast<double>(ir.count) / schedule.chunks;
      transfer.bottleneck_GBps = std::numeric_limits<double>::infinity();
      transfer.route_begin = static_cast<std::int32_t>(graph.route_links.size());
      for (topology::LinkId l : route) {
        transfer.alpha_us += topology.link(l).alpha_us;
        transfer.bottleneck_GBps = std::min(transfer.bottleneck_GBps, topology.link(l).bw_GBps);
        graph.route_links.push_back(l);
      }
      transfer.route_end = static_cast<std::int32_t>(graph.route_links.size());
      send.transfer = static_cast<std::int32_t>(graph.transfers.size());
      graph.transfers.push_back(transfer);
    }
  }
  return graph;
}

}  // namespace optiflow::sim
