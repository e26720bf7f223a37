#include "optiflow/hw_runner/level_plan.hpp"

#include <algorithm>
#include <string>

#include "optiflow/support/error.hpp"

namespace optiflow::hw_runner {
namespace {

using schedule::FlatSchedule;
using schedule::kNoStep;
using schedule::StepId;
using schedule::StepKind;

constexpr std::uint32_t kNone = schedule::kNone;

// Nodes of the level graph: one per local step, one per message (a send half and the receive
// half that takes it: the receive lands in its own staging region, so it may be posted as soon
// as the message is sent), and one per receiving step for its finish (the copy or reduction
// out of staging, after the step's predecessors). A step starts at its first node and
// completes at its last.
struct LevelGraph {
  std::vector<std::uint32_t> message, finish, last;  // per step (kNone where none)
  std::vector<std::vector<std::uint32_t>> successors;
  std::uint32_t nodes = 0;
};

LevelGraph build_graph(const FlatSchedule& flat) {
  const std::size_t n = flat.step_count();
  LevelGraph graph;
  graph.message.assign(n, kNone);  // for a step that sends: its message's node
  graph.finish.assign(n, kNone);   // for a step that receives or is local
  graph.last.assign(n, kNone);
  std::vector<std::uint32_t> received(n, kNone);  // for a step that receives: its message
  for (StepId id = 0; id < n; ++id)
    if (schedule::step_sends(flat.step(id).kind)) {
      graph.message[id] = graph.nodes++;
      const StepId receive = flat.matching_receive(id);
      if (receive != kNoStep) received[receive] = graph.message[id];
    }
  for (StepId id = 0; id < n; ++id) {
    const StepKind kind = flat.step(id).kind;
    if (schedule::step_receives(kind) || !schedule::step_sends(kind))
      graph.finish[id] = graph.nodes++;
    graph.last[id] = schedule::step_sends(kind) ? graph.message[id] : graph.finish[id];
  }
  graph.successors.resize(graph.nodes);
  for (StepId id = 0; id < n; ++id) {
    // Where the step's own work begins: its finish, or (a plain send) its message.
    const std::uint32_t begins = graph.finish[id] != kNone ? graph.finish[id] : graph.message[id];
    if (received[id] != kNone) graph.successors[received[id]].push_back(graph.finish[id]);
    if (graph.finish[id] != kNone && graph.message[id] != kNone)
      graph.successors[graph.finish[id]].push_back(graph.message[id]);
    if (id > flat.block_of(id).first) graph.successors[graph.last[id - 1]].push_back(begins);
    for (StepId dep : flat.deps(id)) graph.successors[graph.last[dep]].push_back(begins);
  }
  return graph;
}

}  // namespace

bool LevelPlan::stages(StepKind kind) {
  return schedule::step_receives(kind);
}

LevelPlan::LevelPlan(const FlatSchedule& flat) : flat_(flat) {
  const std::size_t n = flat.step_count();
  const LevelGraph graph = build_graph(flat);
  // Longest path from the sources (Kahn's order): a node's level is one past its predecessors'.
  std::vector<std::uint32_t> indegree(graph.nodes, 0), level(graph.nodes, 0), ready;
  for (const auto& successors : graph.successors)
    for (std::uint32_t s : successors) ++indegree[s];
  for (std::uint32_t node = 0; node < graph.nodes; ++node)
    if (indegree[node] == 0) ready.push_back(node);
  std::size_t placed = 0;
  while (!ready.empty()) {
    const std::uint32_t node = ready.back();
    ready.pop_back();
    ++placed;
    level_count_ = std::max<std::size_t>(level_count_, level[node] + 1);
    for (std::uint32_t s : graph.successors[node]) {
      level[s] = std::max(level[s], level[node] + 1);
      if (--indegree[s] == 0) ready.push_back(s);
    }
  }
  if (placed < graph.nodes) {
    for (StepId id = 0; id < n; ++id)
      if (indegree[graph.last[id]] > 0) {
        const schedule::FlatBlock& block = flat.block_of(id);
        throw support::InputError(
            support::SourceLocation{flat.schedule().name, 0, 0, {}},
            "the schedule deadlocks: rank " + std::to_string(block.rank) + " tb " +
                std::to_string(block.index) + " step " + std::to_string(flat.index_in_block(id)) +
                " (" + std::string(schedule::to_string(flat.step(id).kind)) + ") can never run");
      }
  }
  recv_level_.assign(n, kNone);
  finish_level_.assign(n, kNone);
  send_level_.assign(n, kNone);
  staging_offset_.assign(n, -1);
  staging_total_.assign(static_cast<std::size_t>(flat.schedule().ranks), 0);
  for (StepId id = 0; id < n; ++id) {
    const StepKind kind = flat.step(id).kind;
    if (schedule::step_receives(kind))
      recv_level_[id] = level[graph.message[flat.matching_send(id)]];
    if (graph.finish[id] != kNone) finish_level_[id] = level[graph.finish[id]];
    if (schedule::step_sends(kind)) send_level_[id] = level[graph.message[id]];
    if (stages(kind)) {
      std::int64_t& total = staging_total_[static_cast<std::size_t>(flat.rank_of(id))];
      staging_offset_[id] = total;
      total += flat.step(id).count;
    }
  }
}

std::int64_t LevelPlan::staging_chunks(std::int32_t rank) const {
  return staging_total_[static_cast<std::size_t>(rank)];
}

std::vector<PlanLevel> LevelPlan::rank_levels(std::int32_t rank) const {
  std::vector<PlanLevel> levels(level_count_);
  const auto first_block = flat_.first_block()[static_cast<std::size_t>(rank)];
  const auto end_block = flat_.first_block()[static_cast<std::size_t>(rank) + 1];
  for (auto b = first_block; b < end_block; ++b)
    for (StepId id = flat_.blocks()[b].first; id < flat_.blocks()[b].end; ++id) {
      const StepKind kind = flat_.step(id).kind;
      if (schedule::step_receives(kind)) levels[recv_level_[id]].recvs.push_back(id);
      if (schedule::step_sends(kind)) levels[send_level_[id]].sends.push_back(id);
      if (finish_level_[id] != kNone) levels[finish_level_[id]].local.push_back(id);
    }
  for (PlanLevel& level : levels) {
    std::ranges::sort(level.sends);
    std::ranges::sort(level.recvs, {}, [&](StepId id) { return flat_.matching_send(id); });
    // Local steps of one level are independent; block order keeps the issue deterministic.
    std::ranges::sort(level.local);
  }
  return levels;
}

}  // namespace optiflow::hw_runner
