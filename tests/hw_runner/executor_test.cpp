// The runner's executor and data check, over the loopback network: compiled and baseline
// schedules of every collective compute the right data; wrong schedules are caught by the data
// check (not by the verifier, which these tests bypass); a deadlock is named.
#include <gtest/gtest.h>

#include "../compiled_schedule.hpp"
#include "in_process.hpp"
#include "optiflow/baselines/nccl.hpp"
#include "optiflow/compiler/compiler.hpp"
#include "optiflow/hw_runner/buffers.hpp"
#include "optiflow/support/error.hpp"
#include "optiflow/topology/generators.hpp"

namespace optiflow::hw_runner {
namespace {

using schedule::Schedule;
using schedule::StepKind;
using support::Collective;
using testing_support::run_in_process;

using optiflow::testing_support::compiled;

Schedule nccl_ring(const std::string& topology_name, Collective collective) {
  const topology::Topology topo = *topology::make_builtin_topology(topology_name);
  return baselines::nccl_ring_schedule(baselines::nccl_ring_graph(topo), collective, topo.name());
}

TEST(PatternTest, ValuesDifferAcrossRanksChunksAndElements) {
  EXPECT_NE(pattern_value(0, 0, 0), pattern_value(1, 0, 0));
  EXPECT_NE(pattern_value(0, 0, 0), pattern_value(0, 1, 0));
  EXPECT_NE(pattern_value(0, 0, 0), pattern_value(0, 0, 1));
  EXPECT_NE(pattern_value(3, 5, 7), kPoison);
}

TEST(BufferLayoutTest, InPlaceAllGatherInputIsTheRanksSliceOfTheOutput) {
  const Schedule s = compiled("ring over all", "ring4", Collective::all_gather);
  ASSERT_TRUE(s.inplace);
  RankBuffers buffers(BufferLayout::of(s, 2, round_size(s, 4096)));
  const std::int64_t own = buffers.layout().own_chunks;
  EXPECT_EQ(buffers.chunks(schedule::BufferKind::input, 0, 1).data(),
            buffers.chunks(schedule::BufferKind::output, 2 * own, 1).data());
  EXPECT_THROW(buffers.chunks(schedule::BufferKind::input, own, 1), support::InputError);
}

TEST(BufferLayoutTest, RoundSizeCutsWholeElementsPerChunk) {
  const Schedule s = compiled("ring over all", "ring4", Collective::all_gather);
  const std::uint64_t unit = static_cast<std::uint64_t>(s.chunks) * sizeof(Element);
  EXPECT_EQ(round_size(s, 1), unit);
  EXPECT_EQ(round_size(s, 10 * unit + 3), 10 * unit);
}

TEST(BufferLayoutTest, FreshBuffersFailTheCheckAndFilledOnesOnlyWhereNotWritten) {
  const Schedule s = compiled("ring over all", "ring4", Collective::all_gather);
  RankBuffers buffers(BufferLayout::of(s, 0, round_size(s, 1024)));
  buffers.fill();
  // Only rank 0's own quarter is in place before the collective runs.
  EXPECT_EQ(buffers.count_wrong(), buffers.output().size() * 3 / 4);
}

struct Case {
  std::string program, topology;
  Collective collective;
};

class CompiledScheduleTest : public ::testing::TestWithParam<Case> {};

TEST_P(CompiledScheduleTest, EveryRankEndsWithTheExpectedData) {
  const Case& c = GetParam();
  const Schedule s = compiled(c.program, c.topology, c.collective);
  const auto run = run_in_process(s, round_size(s, 64 * 1024), 2);
  ASSERT_TRUE(run.finished) << run.waiting;
  EXPECT_EQ(run.wrong, 0u);
}

INSTANTIATE_TEST_SUITE_P(
    Programs, CompiledScheduleTest,
    ::testing::Values(Case{"ring over all", "ring8", Collective::all_gather},
                      Case{"direct over all", "fullmesh4", Collective::all_gather},
                      Case{"rd over all", "fullmesh8", Collective::all_gather},
                      Case{"bruck over all", "fullmesh8", Collective::all_gather},
                      Case{"binomial over all", "fullmesh8", Collective::all_gather},
                      Case{"pipeline 4\nring over all", "ring4", Collective::all_gather},
                      Case{"rd over all", "fullmesh8", Collective::reduce_scatter},
                      Case{"rd over all", "fullmesh8", Collective::all_reduce},
                      Case{"ring over all", "ring8", Collective::reduce_scatter},
                      Case{"ring over all", "ring4", Collective::all_reduce},
                      Case{"direct over all", "fullmesh4", Collective::all_reduce}));

TEST(BaselineScheduleTest, NcclRingsOfEveryCollectiveRunCorrectly) {
  for (Collective collective :
       {Collective::all_gather, Collective::reduce_scatter, Collective::all_reduce}) {
    const Schedule s = nccl_ring("dgx1", collective);
    const auto run = run_in_process(s, round_size(s, 32 * 1024));
    ASSERT_TRUE(run.finished) << support::to_string(collective) << ": " << run.waiting;
    EXPECT_EQ(run.wrong, 0u) << support::to_string(collective);
  }
}

TEST(BaselineScheduleTest, OneSlotPerConnectionStillFinishes) {
  const Schedule s = nccl_ring("ring4", Collective::all_reduce);
  const auto run = run_in_process(s, round_size(s, 4096), 1, ExecutorOptions{1});
  ASSERT_TRUE(run.finished) << run.waiting;
  EXPECT_EQ(run.wrong, 0u);
}

// Receives land in place where nothing else on the rank could see them arrive early: every
// receive of a ring All-Gather (each chunk arrives once, and only its forwarding reads it);
// in a ring All-Reduce, the All-Gather half's receives overwrite chunks that the
// Reduce-Scatter half wrote and read, so they are staged.
TEST(ExecutorTest, ReceivesLandInPlaceOnlyWhereNothingElseTouchesThem) {
  auto in_place = [](const Schedule& s) {
    const schedule::FlatSchedule flat(s);
    LoopbackNetwork network(s.ranks);
    RankBuffers buffers(BufferLayout::of(s, 0, round_size(s, 4096)));
    return RankExecutor(flat, 0, buffers, network.endpoint(0)).receives_in_place();
  };
  const Schedule ag = compiled("ring over all", "ring8", Collective::all_gather);
  EXPECT_EQ(in_place(ag), 7u);
  const Schedule ar = compiled("ring over all", "ring8", Collective::all_reduce);
  EXPECT_EQ(in_place(ar), 0u);
}

// The first receive whose destination can move elsewhere inside the output buffer.
schedule::Step& first_receive(Schedule& s) {
  for (auto& program : s.programs)
    for (auto& tb : program.tbs)
      for (auto& step : tb.steps)
        if (step.kind == StepKind::recv || step.kind == StepKind::recv_copy_send) return step;
  throw std::logic_error("no receive");
}

TEST(DataCheckTest, AChunkWrittenToTheWrongPlaceIsCounted) {
  Schedule s = compiled("ring over all", "ring4", Collective::all_gather);
  schedule::Step& step = first_receive(s);
  step.dst_off = (step.dst_off + 1) % s.chunks;
  const std::uint64_t size = round_size(s, 4096);
  const auto run = run_in_process(s, size);
  ASSERT_TRUE(run.finished) << run.waiting;
  EXPECT_GT(run.wrong, 0u);
}

TEST(DataCheckTest, AReductionThatAddsTwiceIsCounted) {
  Schedule s = nccl_ring("ring4", Collective::reduce_scatter);
  // output += output after everything else on rank 0: its first result chunk doubled.
  schedule::Step twice;
  twice.kind = StepKind::reduce;
  twice.src_buf = twice.dst_buf = schedule::BufferKind::output;
  twice.count = 1;
  auto& tbs = s.programs[0].tbs;
  for (std::size_t t = 1; t < tbs.size(); ++t)
    if (!tbs[t].steps.empty())
      twice.deps.push_back(
          {static_cast<std::int32_t>(t), static_cast<std::int32_t>(tbs[t].steps.size()) - 1});
  tbs[0].steps.push_back(twice);
  const auto run = run_in_process(s, round_size(s, 4096));
  ASSERT_TRUE(run.finished) << run.waiting;
  EXPECT_GT(run.wrong, 0u);
}

TEST(DeadlockTest, TwoRanksThatBothReceiveFirstAreReportedWaiting) {
  Schedule s;
  s.name = "deadlock";
  s.collective = Collective::all_gather;
  s.ranks = 2;
  s.chunks = 2;
  s.programs.resize(2);
  for (int r = 0; r < 2; ++r) {
    schedule::ThreadBlock tb;
    tb.send_peer = tb.recv_peer = 1 - r;
    schedule::Step recv;
    recv.kind = StepKind::recv;
    recv.dst_buf = schedule::BufferKind::output;
    recv.dst_off = 1 - r;
    recv.count = 1;
    schedule::Step send;
    send.kind = StepKind::send;
    send.src_buf = schedule::BufferKind::output;
    send.src_off = r;
    send.count = 1;
    tb.steps = {recv, send};
    s.programs[static_cast<std::size_t>(r)].output_chunks = 2;
    s.programs[static_cast<std::size_t>(r)].tbs.push_back(tb);
  }
  const auto run = run_in_process(s, round_size(s, 64));
  EXPECT_FALSE(run.finished);
  EXPECT_NE(run.waiting.find("tb 0 step 0 (r) waits for message 0 from rank 1 on channel 0"),
            std::string::npos)
      << run.waiting;
}

TEST(ExecutorTest, AStepOutsideItsBufferIsRejectedBeforeRunning) {
  Schedule s = compiled("ring over all", "ring4", Collective::all_gather);
  first_receive(s).dst_off = s.chunks;
  EXPECT_THROW(run_in_process(s, round_size(s, 4096)), support::InputError);
}

}  // namespace
}  // namespace optiflow::hw_runner
