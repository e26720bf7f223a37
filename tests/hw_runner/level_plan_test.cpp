// The level plan the NCCL backend issues, executed here on host memory level by level exactly
// as the backend issues it on a GPU stream: local work (local steps, and the copies and
// reductions out of staging of earlier receives), then the group's sends and receives. Correct data
// for every collective shows the plan is a valid order; the properties below show why.
#include "optiflow/hw_runner/level_plan.hpp"

#include <gtest/gtest.h>

#include <map>

#include "../compiled_schedule.hpp"
#include "optiflow/baselines/nccl.hpp"
#include "optiflow/compiler/compiler.hpp"
#include "optiflow/hw_runner/buffers.hpp"
#include "optiflow/support/error.hpp"
#include "optiflow/topology/generators.hpp"

namespace optiflow::hw_runner {
namespace {

using schedule::FlatSchedule;
using schedule::Schedule;
using schedule::StepId;
using schedule::StepKind;
using support::Collective;

using optiflow::testing_support::compiled;

void add(std::span<Element> dst, std::span<const Element> a, std::span<const Element> b) {
  for (std::size_t i = 0; i < dst.size(); ++i) dst[i] = a[i] + b[i];
}

// Wrong elements after running the plan on every rank's host buffers.
std::uint64_t run_plan(const Schedule& s, std::uint64_t size_bytes) {
  const FlatSchedule flat(s);
  const LevelPlan plan(flat);
  std::vector<RankBuffers> buffers;
  std::vector<std::vector<Element>> staging;
  std::vector<std::vector<PlanLevel>> levels;
  for (int r = 0; r < s.ranks; ++r) {
    buffers.emplace_back(BufferLayout::of(s, r, size_bytes));
    buffers.back().fill();
    staging.emplace_back(static_cast<std::size_t>(plan.staging_chunks(r)) *
                         buffers.back().layout().chunk_elems);
    levels.push_back(plan.rank_levels(r));
  }
  auto staged = [&](StepId id) {
    const std::size_t elems = buffers[0].layout().chunk_elems;
    return std::span<Element>(staging[static_cast<std::size_t>(flat.rank_of(id))])
        .subspan(static_cast<std::size_t>(plan.staging_offset(id)) * elems,
                 static_cast<std::size_t>(flat.step(id).count) * elems);
  };
  for (std::size_t l = 0; l < plan.level_count(); ++l) {
    std::map<StepId, std::vector<Element>> wire;  // by the send's step id
    for (int r = 0; r < s.ranks; ++r) {
      RankBuffers& b = buffers[static_cast<std::size_t>(r)];
      const PlanLevel& level = levels[static_cast<std::size_t>(r)][l];
      for (StepId id : level.local) {
        const auto& step = flat.step(id);
        if (step.kind == StepKind::nop) continue;
        if (schedule::step_receives(step.kind)) {
          const std::span<Element> in = staged(id);
          if (step.kind == StepKind::recv || step.kind == StepKind::recv_copy_send)
            std::ranges::copy(in, b.chunks(step.dst_buf, step.dst_off, step.count).begin());
          else if (step.kind == StepKind::recv_reduce_send)
            add(in, in, b.chunks(step.src_buf, step.src_off, step.count));
          else
            add(b.chunks(step.dst_buf, step.dst_off, step.count),
                b.chunks(step.src_buf, step.src_off, step.count), in);
          continue;
        }
        auto src = b.chunks(step.src_buf, step.src_off, step.count);
        auto dst = b.chunks(step.dst_buf, step.dst_off, step.count);
        if (step.kind == StepKind::copy)
          std::copy(src.begin(), src.end(), dst.begin());
        else
          add(dst, dst, src);
      }
      for (StepId id : level.sends) {
        const auto& step = flat.step(id);
        std::span<const Element> from;
        if (step.kind == StepKind::send)
          from = b.chunks(step.src_buf, step.src_off, step.count);
        else if (step.kind == StepKind::recv_reduce_send)
          from = staged(id);
        else
          from = b.chunks(step.dst_buf, step.dst_off, step.count);
        wire[id].assign(from.begin(), from.end());
      }
    }
    for (int r = 0; r < s.ranks; ++r)
      for (StepId id : levels[static_cast<std::size_t>(r)][l].recvs) {
        const auto message = wire.find(flat.matching_send(id));
        EXPECT_NE(message, wire.end()) << "a receive in a level without its send";
        if (message == wire.end()) return ~0ull;
        std::ranges::copy(message->second, staged(id).begin());
      }
  }
  std::uint64_t wrong = 0;
  for (RankBuffers& b : buffers) wrong += b.count_wrong();
  return wrong;
}

TEST(LevelPlanTest, CompiledAndBaselineSchedulesComputeTheirCollectives) {
  for (Collective collective :
       {Collective::all_gather, Collective::reduce_scatter, Collective::all_reduce}) {
    const Schedule ring = compiled("ring over all", "ring8", collective);
    EXPECT_EQ(run_plan(ring, round_size(ring, 8192)), 0u) << support::to_string(collective);
    const topology::Topology dgx1 = *topology::make_builtin_topology("dgx1");
    const Schedule nccl =
        baselines::nccl_ring_schedule(baselines::nccl_ring_graph(dgx1), collective, "dgx1");
    EXPECT_EQ(run_plan(nccl, round_size(nccl, 8192)), 0u) << support::to_string(collective);
  }
  const Schedule direct = compiled("direct over all", "fullmesh4", Collective::all_reduce);
  EXPECT_EQ(run_plan(direct, round_size(direct, 4096)), 0u);
}

TEST(LevelPlanTest, SendsAndTheirReceivesShareALevelAndEverythingElseFollows) {
  const Schedule s = compiled("ring over all", "ring4", Collective::all_reduce);
  const FlatSchedule flat(s);
  const LevelPlan plan(flat);
  // The level a step's own work completes in.
  auto done = [&](StepId id) {
    return schedule::step_sends(flat.step(id).kind) ? plan.send_level(id) : plan.finish_level(id);
  };
  for (StepId id = 0; id < flat.step_count(); ++id) {
    const auto kind = flat.step(id).kind;
    if (schedule::step_receives(kind)) {
      EXPECT_EQ(plan.recv_level(id), plan.send_level(flat.matching_send(id)));
      EXPECT_LT(plan.recv_level(id), plan.finish_level(id));
    }
    if (schedule::step_sends(kind) && schedule::step_receives(kind)) {
      EXPECT_LT(plan.finish_level(id), plan.send_level(id));
    }
    const auto begins =
        plan.finish_level(id) != schedule::kNone ? plan.finish_level(id) : plan.send_level(id);
    if (id > flat.block_of(id).first) {
      EXPECT_LT(done(id - 1), begins);
    }
    for (StepId dep : flat.deps(id)) EXPECT_LT(done(dep), begins);
  }
  // A ring All-Reduce of N ranks: 2(N-1) rounds, each a message level and a finish level.
  EXPECT_LE(plan.level_count(), 2u * 2 * (4 - 1) + 1);
}

TEST(LevelPlanTest, ADeadlockedScheduleIsRejectedNamingAStep) {
  Schedule s;
  s.name = "deadlock";
  s.ranks = 2;
  s.chunks = 2;
  s.programs.resize(2);
  for (int r = 0; r < 2; ++r) {
    schedule::ThreadBlock tb;
    tb.send_peer = tb.recv_peer = 1 - r;
    schedule::Step recv, send;
    recv.kind = StepKind::recv;
    recv.dst_off = 1 - r;
    recv.count = 1;
    send.kind = StepKind::send;
    send.src_off = r;
    send.count = 1;
    tb.steps = {recv, send};
    s.programs[static_cast<std::size_t>(r)].output_chunks = 2;
    s.programs[static_cast<std::size_t>(r)].tbs.push_back(tb);
  }
  const FlatSchedule flat(s);
  try {
    const LevelPlan plan(flat);
    FAIL() << "no error";
  } catch (const support::InputError& e) {
    EXPECT_NE(std::string(e.what()).find("deadlocks: rank 0 tb 0 step 0 (r) can never run"),
              std::string::npos)
        << e.what();
  }
}

}  // namespace
}  // namespace optiflow::hw_runner
