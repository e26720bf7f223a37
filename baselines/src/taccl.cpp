// TACCL-style baseline (Shah et al., "TACCL: Guiding Collective Algorithm Synthesis using
// Communication Sketches", NSDI'23): the sketch shapes a logical topology, a routing MILP picks
// each chunk's tree, a greedy heuristic orders the transfers, a scheduling MILP times them and
// groups inter-node sends; the result is lowered to the schedule IR, one thread block per
// connection, each transfer after the receive that brought its chunk.
#include "optiflow/baselines/taccl.hpp"

#include <CbcConfig.h>

#include <algorithm>
#include <chrono>
#include <map>
#include <stdexcept>
#include <tuple>

#include "optiflow/baselines/synthesis.hpp"
#include "optiflow/support/error.hpp"
#include "optiflow/support/strings.hpp"
#include "schedule_frame.hpp"
#include "taccl_internal.hpp"

namespace optiflow::baselines {
namespace {

using schedule::StepKind;
using schedule::StepRef;

// One step's worth of a transfer: consecutive chunks of one group on one link.
struct Transfer {
  int link = 0;
  double send_time = 0;
  int position = 0;  // the group's place in its link's order
  int first_chunk = 0, count = 1;
  auto key() const { return std::tie(send_time, position, first_chunk); }
};

std::vector<Transfer> transfers_of(const taccl::LogicalTopology& logical,
                                   const taccl::Schedule& timed) {
  std::vector<Transfer> all;
  for (std::size_t e = 0; e < logical.links.size(); ++e) {
    int position = 0;
    for (std::vector<int> group : timed.groups[e]) {
      const double when = timed.send_time[static_cast<std::size_t>(group.front())][e];
      std::sort(group.begin(), group.end());
      for (std::size_t i = 0; i < group.size();) {
        std::size_t j = i + 1;
        while (j < group.size() && group[j] == group[j - 1] + 1) ++j;
        all.push_back(
            Transfer{static_cast<int>(e), when, position, group[i], static_cast<int>(j - i)});
        i = j;
      }
      ++position;
    }
  }
  return all;
}

schedule::Schedule lower(const topology::Topology& topology, const taccl::LogicalTopology& logical,
                         const taccl::ChunkSpace& space, const taccl::Schedule& timed) {
  schedule::Schedule s = schedule_frame("taccl", support::Collective::all_gather, logical.ranks,
                                        space.chunks(), topology.name());
  const schedule::BufferKind buffer = frame_buffer(support::Collective::all_gather);
  std::vector<Transfer> transfers = transfers_of(logical, timed);
  std::vector<std::vector<const Transfer*>> per_link(logical.links.size());
  for (const Transfer& t : transfers) per_link[static_cast<std::size_t>(t.link)].push_back(&t);
  for (auto& list : per_link)
    std::sort(list.begin(), list.end(),
              [](const Transfer* a, const Transfer* b) { return a->key() < b->key(); });
  // A receive and a send block per connection, created link by link.
  std::vector<int> send_tb(logical.links.size(), -1), recv_tb(logical.links.size(), -1);
  for (std::size_t e = 0; e < logical.links.size(); ++e) {
    if (per_link[e].empty()) continue;
    const taccl::LogicalLink& l = logical.links[e];
    auto& src_tbs = s.programs[static_cast<std::size_t>(l.src)].tbs;
    send_tb[e] = static_cast<int>(src_tbs.size());
    src_tbs.emplace_back().send_peer = l.dst;
    auto& dst_tbs = s.programs[static_cast<std::size_t>(l.dst)].tbs;
    recv_tb[e] = static_cast<int>(dst_tbs.size());
    dst_tbs.emplace_back().recv_peer = l.src;
  }
  // Receives first: every send then names the receive that brought its chunks.
  std::map<std::pair<int, int>, StepRef> received;  // (rank, chunk) -> its receive
  for (std::size_t e = 0; e < logical.links.size(); ++e) {
    const taccl::LogicalLink& l = logical.links[e];
    for (const Transfer* t : per_link[e]) {
      auto& block =
          s.programs[static_cast<std::size_t>(l.dst)].tbs[static_cast<std::size_t>(recv_tb[e])];
      schedule::Step step = chunk_step(StepKind::recv, buffer, t->first_chunk);
      step.count = t->count;
      block.steps.push_back(std::move(step));
      const StepRef ref{recv_tb[e], static_cast<std::int32_t>(block.steps.size() - 1)};
      for (int c = t->first_chunk; c < t->first_chunk + t->count; ++c) received[{l.dst, c}] = ref;
    }
  }
  for (std::size_t e = 0; e < logical.links.size(); ++e) {
    const taccl::LogicalLink& l = logical.links[e];
    for (const Transfer* t : per_link[e]) {
      std::vector<StepRef> deps;
      for (int c = t->first_chunk; c < t->first_chunk + t->count; ++c)
        if (space.owner(c) != l.src) deps.push_back(received.at({l.src, c}));
      std::sort(deps.begin(), deps.end());
      deps.erase(std::unique(deps.begin(), deps.end()), deps.end());
      schedule::Step step =
          chunk_step(StepKind::send, buffer, t->first_chunk, std::move(deps), l.route);
      step.count = t->count;
      s.programs[static_cast<std::size_t>(l.src)]
          .tbs[static_cast<std::size_t>(send_tb[e])]
          .steps.push_back(std::move(step));
    }
  }
  return s;
}

std::string describe(const TacclSketch& sketch, int per_node) {
  std::string intra = "none";
  if (sketch.intra == TacclIntraStrategy::switch_)
    intra = support::strprintf("switch over %zu group(s), %s", sketch.switches.size(),
                               sketch.hyperedge == TacclHyperedge::uc_min   ? "uc-min"
                               : sketch.hyperedge == TacclHyperedge::uc_max ? "uc-max"
                                                                            : "no hyperedge rule");
  if (sketch.intra == TacclIntraStrategy::minmax) intra = "minmax";
  if (sketch.intra == TacclIntraStrategy::maxmin) intra = "maxmin";
  std::string text = support::strprintf("sketch %s: %d node(s), intra-node %s",
                                        sketch.source.c_str(), sketch.nnodes, intra.c_str());
  if (sketch.nnodes > 1) {
    std::string conn;
    for (const auto& [gpu, dsts] : relay_map(sketch, per_node)) {
      if (conn.size() > 60) {
        conn += " ...";
        break;
      }
      conn += (conn.empty() ? "" : " ") + std::to_string(gpu) + "->";
      for (std::size_t i = 0; i < dsts.size(); ++i)
        conn += (i ? "," : "") + std::to_string(dsts[i]);
    }
    text += ", relay " + (sketch.internode_conn_name.empty() ? conn : sketch.internode_conn_name);
  }
  std::string offsets;
  for (const auto& [offset, size] : sketch.symmetry_offsets)
    offsets += support::strprintf("%s[%d,%d]", offsets.empty() ? "" : " ", offset, size);
  return text + ", symmetry " + (offsets.empty() ? "none" : offsets) +
         support::strprintf(", input_chunkup %d", sketch.input_chunkup);
}

std::string stage_line(const taccl::StageReport& r, const std::string& unit) {
  return support::strprintf(
      "%s MILP: %s, makespan %.3f %s, gap %s, %d columns (%d binary), %d "
      "rows, %.2f s",
      r.name.c_str(), r.status.c_str(), r.objective, unit.c_str(),
      r.gap ? support::strprintf("%.2f%%", 100 * *r.gap).c_str() : "-", r.columns, r.integers,
      r.rows, r.seconds);
}

}  // namespace

namespace taccl {
namespace {

constexpr double kOptimalGap = 1e-6;  // an optimum with a larger gap stopped at --gap

// The stage's status as TACCL's reports word it.
std::string status_text(const mip::Solution& solution) {
  switch (solution.status) {
    case mip::Status::optimal:
      return solution.gap() > kOptimalGap ? "optimal within the gap limit" : "optimal";
    case mip::Status::feasible:
      return solution.from_start ? "feasible (time limit; the heuristic start)"
                                 : "feasible (time limit)";
    case mip::Status::infeasible:
      return "infeasible";
    case mip::Status::no_solution:
      break;
  }
  return "no solution (time limit)";
}

}  // namespace

mip::Solution solve_stage(const mip::Model& model, const SynthesisOptions& options,
                          StageReport& report, const std::vector<double>* start) {
  mip::Limits limits;
  limits.time_s = options.time_limit_s;
  limits.gap = options.gap_limit;
  limits.max_nodes = options.max_nodes;
  // Always a progress function, even a silent one: the event handler it brings is part of
  // how CBC searches (mip::solve), and TACCL's solves have always had one.
  const mip::Progress progress = [&options](const std::string& line) {
    if (options.progress) options.progress(line);
  };
  mip::Solution solution = mip::solve(model, limits, progress, start);
  report.status = status_text(solution);
  if (solution.found()) report.gap = solution.gap();
  report.objective = solution.objective;
  report.seconds = solution.seconds;
  return solution;
}

}  // namespace taccl

Synthesized taccl_synthesize(const topology::Topology& topology, support::Collective collective,
                             const SynthesisOptions& options) {
  const auto begin = std::chrono::steady_clock::now();
  if (collective != support::Collective::all_gather)
    throw support::UnsupportedError(
        support::UnsupportedError::Subject::collective,
        "taccl builds allgather only (TACCL derives reduce-scatter and allreduce by reversing a "
        "synthesized allgather with `taccl combine`, which this baseline does not)");
  if (options.taccl_chunks < 0 || options.taccl_instances < 1)  // the caller's to check
    throw std::invalid_argument("taccl: taccl_chunks must be >= 0 and taccl_instances >= 1");
  TacclSketch sketch = options.taccl_sketch.empty() ? default_taccl_sketch(topology)
                                                    : read_taccl_sketch(options.taccl_sketch);
  if (options.taccl_chunks > 0) sketch.input_chunkup = options.taccl_chunks;
  const topology::TacclProfile* profile = options.taccl_profile ? &*options.taccl_profile : nullptr;
  auto progress = [&](const std::string& line) {
    if (options.progress) options.progress(line);
  };
  progress("taccl: " + describe(sketch, topology.rank_count() / std::max(1, sketch.nnodes)));
  const taccl::LogicalTopology logical = taccl::logical_topology(topology, sketch, profile);
  const taccl::ChunkSpace space{logical.ranks, sketch.input_chunkup};

  const taccl::Routing routing = taccl::solve_routing(logical, sketch, space, options);
  progress("taccl: " + stage_line(routing.report, logical.cost_unit));
  const taccl::Ordering ordering = taccl::order_transfers(logical, sketch, space, routing);
  progress(support::strprintf("taccl: ordering heuristic %d placed the routed transfers",
                              ordering.heuristic));
  const taccl::Schedule timed = taccl::solve_schedule(logical, space, routing, ordering, options);
  progress("taccl: " + stage_line(timed.report, logical.cost_unit));

  Synthesized result;
  result.schedule = lower(topology, logical, space, timed);
  int grouped = 0;
  for (const auto& groups : timed.groups)
    for (const auto& g : groups) grouped += g.size() > 1 ? static_cast<int>(g.size()) : 0;
  result.notes = {
      describe(sketch, logical.per_node),
      support::strprintf("logical topology: %d GPUs, %zu links, %zu switch hyperedges; costs in %s",
                         logical.ranks, logical.links.size(), logical.switches.size(),
                         logical.cost_unit.c_str()),
      stage_line(routing.report, logical.cost_unit),
      support::strprintf("ordering: TACCL's heuristic %d", ordering.heuristic),
      stage_line(timed.report, logical.cost_unit) +
          support::strprintf(", %d chunks sent in groups over inter-node links", grouped)};
  result.solver.solver = std::string("CBC ") + CBC_VERSION;
  const bool optimal = routing.report.optimal() && timed.report.optimal();
  result.solver.status =
      optimal ? "optimal (both MILPs)"
              : "routing " + routing.report.status + ", scheduling " + timed.report.status;
  result.solver.gap = std::max(routing.report.gap.value_or(0), timed.report.gap.value_or(0));
  result.solver.seconds =
      std::chrono::duration<double>(std::chrono::steady_clock::now() - begin).count();
  return with_instances(std::move(result), options.taccl_instances);
}

Synthesized with_instances(Synthesized built, int instances) {
  built.schedule = schedule::replicate_instances(built.schedule, instances);
  if (instances > 1)
    built.notes.push_back(support::strprintf(
        "%d instances: each on channels of its own and 1/%d of every chunk", instances, instances));
  return built;
}

}  // namespace optiflow::baselines
