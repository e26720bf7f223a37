// The compiler's passes over the Plan (docs/compiler.md), one file each under passes/; the
// table in pass_table.hpp runs them in order and checks the plan between them. Each is linear
// in the plan's transfers and dependencies, up to a logarithm, so that compile time per
// transfer does not grow with the cluster.
#pragma once

#include <numeric>
#include <string>
#include <vector>

#include "optiflow/compiler/limits.hpp"
#include "optiflow/compiler/plan.hpp"
#include "optiflow/schedule/schedule.hpp"
#include "optiflow/support/collective.hpp"
#include "optiflow/topology/link_cost.hpp"
#include "optiflow/topology/topology.hpp"

namespace optiflow::compiler::passes {

/// A transfer's position in its plan.
using Index = std::int32_t;
inline std::size_t at(Index index) {
  return static_cast<std::size_t>(index);
}

/// Everything of `plan` but its transfers and their dependencies.
Plan empty_like(const Plan& plan);

/// The program a plan came from, so that passes can point errors at the step responsible.
struct ProgramText {
  const std::string& source;
  const std::string& text;
};

/// Throws DslError at plan.statements[statement] (at the file when there is none).
[[noreturn]] void fail_at_statement(const ProgramText& program, const Plan& plan,
                                    std::int32_t statement, const std::string& message);

/// Cuts every transfer into plan.pipeline equal slices; slice k waits only for the slices of
/// its dependencies that carry overlapping data.
void pipeline(Plan& plan);

/// The Reduce-Scatter that mirrors an All-Gather plan in time: each transfer reversed, the
/// receiver reducing, and each sender waiting for everything its All-Gather children sent on.
Plan mirror_reduce_scatter(const Plan& all_gather);

/// Reduce-Scatter (mirrored) then the All-Gather; each All-Gather root waits for the
/// reductions into its data. Throws DslError when those waits exceed
/// limits.max_join_dependencies, counted before any is stored.
Plan all_reduce(const Plan& all_gather, const EvalLimits& limits, const ProgramText& program);

/// Fixes the chunk count (the least common multiple of every fraction's denominator and the
/// rank count) and sets first_chunk/chunk_count. The evaluator has already rejected programs
/// needing more than `max_chunks`, so more is an InternalError.
void assign_chunks(Plan& plan, std::int64_t max_chunks);

/// Merges transfers of contiguous chunks that one step sends in the same round between the
/// same ranks (e.g. recursive doubling's "everything gathered so far") into one message.
void coalesce(Plan& plan);

/// Explicit routes become link lists; the rest take the cheapest path, each link costing its
/// alpha plus the time to move 1 MiB over it (so faster link classes win), avoiding links the
/// program avoids. Each distinct path is stored once in plan.routes. Throws DslError at the
/// step when no path exists.
void route(Plan& plan, const topology::Topology& topology, const ProgramText& program);

/// Earliest-start list scheduling with the simulator's alpha-beta costs at
/// `reference_size_bytes`: ready transfers in order of (ready time, stage, round, index) start
/// at max(ready, every route link free), keep each link busy for bytes / its bandwidth, and
/// finish after the route's alphas + bytes / bottleneck bandwidth. Sets start/finish.
void order(Plan& plan, const topology::Topology& topology, std::uint64_t reference_size_bytes);

/// The protocol per power-of-two size, 1 byte to 2^40 (ascending): the program's, when it
/// forces one (then one entry); otherwise the protocol whose estimated time is lowest among
/// those NCCL enables here: its launch cost and longest chain of step latencies, plus the data
/// at the rate `order` found for Simple at `reference_size_bytes` (run order first), scaled by
/// the protocol's data share.
std::vector<std::pair<std::uint64_t, topology::Protocol>> choose_protocols(
    const Plan& plan, const topology::Topology& topology, std::uint64_t reference_size_bytes);

/// Spreads pieces and their pipeline slices over plan.channels channels, round-robin.
void assign_channels(Plan& plan);

/// The schedule IR: per rank, a thread block per (send peer, channel) and per (receive peer,
/// channel), steps in estimated start order, dependencies on the receives that bring data.
schedule::Schedule emit(const Plan& plan, support::Collective collective, const std::string& name,
                        const std::string& topology_name);

/// Structural checks between passes; returns the first problem or "".
std::string check_plan(const Plan& plan, const topology::Topology* topology);

/// For each transfer, the transfers that list it as a dependency, ascending.
IndexLists dependents(const Plan& plan);

/// The cost of a transfer over each of plan.routes with `protocol` (the simulator's).
std::vector<topology::TransferCost> route_costs(const Plan& plan,
                                                const topology::Topology& topology,
                                                topology::Protocol protocol);

/// Lists of known sizes, filled in any order: `fill(place)` calls place(list, item) for each
/// item; every list keeps its items in the order placed.
template <typename Fill>
IndexLists gather_lists(const std::vector<std::uint32_t>& sizes, Fill fill) {
  std::vector<std::uint32_t> begin(sizes.size() + 1, 0);
  std::partial_sum(sizes.begin(), sizes.end(), begin.begin() + 1);
  std::vector<std::int32_t> items(begin.back());
  std::vector<std::uint32_t> next(begin.begin(), begin.end() - 1);
  fill([&](std::size_t list, std::int32_t item) { items[next[list]++] = item; });
  return IndexLists(std::move(begin), std::move(items));
}

}  // namespace optiflow::compiler::passes
