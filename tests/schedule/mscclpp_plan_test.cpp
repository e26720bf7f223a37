// MSCCL++ execution-plan export: the structure its executor reads, and the round trip through
// the importer for compiled and baseline schedules of every collective.
#include "optiflow/schedule/mscclpp_plan.hpp"

#include <gtest/gtest.h>

#include <nlohmann/json.hpp>

#include "../compiled_schedule.hpp"
#include "optiflow/baselines/nccl.hpp"
#include "optiflow/compiler/compiler.hpp"
#include "optiflow/schedule/schedule_io.hpp"
#include "optiflow/topology/generators.hpp"

namespace optiflow::schedule {
namespace {

using support::Collective;

using optiflow::testing_support::compiled;

// What the plan does not carry: the topology's name, routes, the protocol per size, and fields
// a step kind ignores.
Schedule structural(Schedule s) {
  s.topology.clear();
  s.protocol_by_size.clear();
  for (RankProgram& program : s.programs)
    for (ThreadBlock& tb : program.tbs)
      for (Step& step : tb.steps) {
        step.route.clear();
        const bool reads_src =
            step.kind == StepKind::send || step.kind == StepKind::copy ||
            step.kind == StepKind::reduce || step.kind == StepKind::recv_reduce_copy ||
            step.kind == StepKind::recv_reduce_send || step.kind == StepKind::recv_reduce_copy_send;
        const bool writes_dst = step.kind != StepKind::send && step.kind != StepKind::nop &&
                                step.kind != StepKind::recv_reduce_send;
        if (!reads_src) step.src_buf = BufferKind::output, step.src_off = 0;
        if (!writes_dst) step.dst_buf = BufferKind::output, step.dst_off = 0;
        if (step.kind == StepKind::nop) step.count = 0;
      }
  return s;
}

void expect_round_trip(const Schedule& s) {
  const std::string plan = write_mscclpp_plan(s);
  const Schedule back = parse_mscclpp_plan(plan, "plan.json");
  EXPECT_EQ(write_schedule_json(structural(back)), write_schedule_json(structural(s))) << s.name;
  EXPECT_EQ(write_mscclpp_plan(back), plan) << "the export is not deterministic";
}

TEST(MscclppPlanTest, CompiledSchedulesRoundTrip) {
  for (Collective collective :
       {Collective::all_gather, Collective::reduce_scatter, Collective::all_reduce})
    expect_round_trip(compiled("ring over all", "ring8", collective));
  expect_round_trip(compiled("direct over all", "fullmesh4", Collective::all_gather));
  expect_round_trip(compiled("ring over all", "a100x1", Collective::all_gather));
}

TEST(MscclppPlanTest, BaselineSchedulesWithDependenciesRoundTrip) {
  const topology::Topology dgx1 = *topology::make_builtin_topology("dgx1");
  for (Collective collective :
       {Collective::all_gather, Collective::reduce_scatter, Collective::all_reduce})
    expect_round_trip(
        baselines::nccl_ring_schedule(baselines::nccl_ring_graph(dgx1), collective, "dgx1"));
  const auto trees = baselines::nccl_trees(baselines::nccl_ring_graph(dgx1), dgx1);
  expect_round_trip(baselines::nccl_tree_schedule(trees, 8, Collective::all_reduce, "dgx1"));
}

TEST(MscclppPlanTest, PlanHasTheExecutorsFields) {
  const Schedule s = compiled("ring over all", "ring4", Collective::all_gather);
  const auto plan = nlohmann::json::parse(write_mscclpp_plan(s));
  EXPECT_EQ(plan.at("collective"), "allgather");
  EXPECT_EQ(plan.at("inplace"), s.inplace);
  ASSERT_EQ(plan.at("gpus").size(), 4u);
  const auto& gpu = plan.at("gpus").at(1);
  EXPECT_EQ(gpu.at("id"), 1);
  EXPECT_EQ(gpu.at("output_chunks"), s.programs[1].output_chunks);
  // A ring: rank 1 is connected to rank 2 (it sends there) and rank 0 (it receives from it).
  const auto& connected = gpu.at("channels").at(0).at("connected_to");
  EXPECT_NE(std::find(connected.begin(), connected.end(), 2), connected.end());
  EXPECT_NE(std::find(connected.begin(), connected.end(), 0), connected.end());
  // Every send is a put into rank 2's output followed by a signal; every receive a wait.
  std::size_t puts = 0, waits = 0;
  for (const auto& tb : gpu.at("threadblocks"))
    for (std::size_t i = 0; i < tb.at("ops").size(); ++i) {
      const auto& op = tb.at("ops")[i];
      if (op.at("name") == "put") {
        ++puts;
        EXPECT_EQ(tb.at("ops").at(i + 1).at("name"), "signal");
      }
      waits += op.at("name") == "wait";
    }
  EXPECT_EQ(puts, 3u);  // N-1 chunks forwarded around the ring
  EXPECT_EQ(waits, 3u);
  EXPECT_EQ(gpu.at("remote_buffers").at(0).at("rank"), 2);
  EXPECT_EQ(gpu.at("remote_buffers").at(0).at("type"), "o");
}

TEST(MscclppPlanTest, ReceivesThatReduceGetStagingAtTheEndOfScratch) {
  const Schedule s = compiled("ring over all", "ring4", Collective::reduce_scatter);
  const auto plan = nlohmann::json::parse(write_mscclpp_plan(s));
  EXPECT_GT(plan.at("gpus").at(0).at("scratch_chunks").get<int>(), s.programs[0].scratch_chunks);
}

}  // namespace
}  // namespace optiflow::schedule
