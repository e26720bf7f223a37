// The schedule verifier on hand-built schedules: correct ring collectives pass, and each kind of
// mistake is reported with the rank, thread block, step and chunk it concerns.
#include "optiflow/schedule/verifier.hpp"

#include <gtest/gtest.h>

#include <utility>

#include "optiflow/topology/generators.hpp"
#include "schedule_builders.hpp"

namespace optiflow::schedule {
namespace {

using namespace testing_support;

// Ring Reduce-Scatter with chunks = ranks, one tb per rank: send its part of chunk r-1, then
// receive-reduce-send chunks r-2, r-3, ..., and finally receive-reduce chunk r into the output.
Schedule ring_reduce_scatter(int ranks, bool inplace) {
  Schedule schedule = header(support::Collective::reduce_scatter, ranks, inplace);
  for (int r = 0; r < ranks; ++r) {
    ThreadBlock tb = block(mod(r + 1, ranks), mod(r - 1, ranks));
    tb.steps.push_back(send(kIn, mod(r - 1, ranks)));
    for (int k = 1; k + 1 < ranks; ++k)
      tb.steps.push_back(step(StepKind::recv_reduce_send, kIn, mod(r - 1 - k, ranks), kIn, 0));
    tb.steps.push_back(step(StepKind::recv_reduce_copy, kIn, r, kOut, 0));
    schedule.programs.push_back(buffers(ranks, 1, {std::move(tb)}));
  }
  return schedule;
}

// In-place ring All-Reduce: the Reduce-Scatter above on the output buffer, ending with rank r
// holding the sum of chunk r, then a ring All-Gather of the sums. `fused` finishes the
// reduction with rrcs, else with rrc and a separate send.
Schedule ring_all_reduce(int ranks, bool fused) {
  Schedule schedule = header(support::Collective::all_reduce, ranks, true);
  for (int r = 0; r < ranks; ++r) {
    ThreadBlock tb = block(mod(r + 1, ranks), mod(r - 1, ranks));
    tb.steps.push_back(send(kOut, mod(r - 1, ranks)));
    for (int k = 1; k + 1 < ranks; ++k)
      tb.steps.push_back(step(StepKind::recv_reduce_send, kOut, mod(r - 1 - k, ranks), kOut, 0));
    if (fused) {
      tb.steps.push_back(step(StepKind::recv_reduce_copy_send, kOut, r, kOut, r));
    } else {
      tb.steps.push_back(step(StepKind::recv_reduce_copy, kOut, r, kOut, r));
      tb.steps.push_back(send(kOut, r));
    }
    for (int j = 1; j + 1 < ranks; ++j)
      tb.steps.push_back(step(StepKind::recv_copy_send, kOut, 0, kOut, mod(r - j, ranks)));
    tb.steps.push_back(recv(kOut, mod(r + 1, ranks)));
    schedule.programs.push_back(buffers(ranks, ranks, {std::move(tb)}));
  }
  return schedule;
}

// Two ranks that each receive the other's chunk before sending their own.
Schedule mutual_wait() {
  Schedule schedule = header(support::Collective::all_gather, 2, true);
  for (int r = 0; r < 2; ++r) {
    ThreadBlock tb = block(1 - r, 1 - r);
    tb.steps = {recv(kOut, 1 - r), send(kOut, r)};
    schedule.programs.push_back(buffers(0, 2, {tb}));
  }
  return schedule;
}

TEST(Verifier, AcceptsRingAllGather) {
  for (bool inplace : {true, false}) {
    const VerifyResult result = verify_schedule(ring_all_gather(4, inplace));
    EXPECT_TRUE(result.ok()) << result.summary();
    EXPECT_EQ(result.steps_executed, inplace ? 24u : 28u);
  }
}

TEST(Verifier, AcceptsRingReduceScatter) {
  for (bool inplace : {true, false}) {
    const VerifyResult result = verify_schedule(ring_reduce_scatter(4, inplace));
    EXPECT_TRUE(result.ok()) << "inplace=" << inplace << "\n" << result.summary();
    EXPECT_EQ(result.steps_executed, 16u);
  }
}

TEST(Verifier, AcceptsRingAllReduce) {
  for (bool fused : {true, false}) {
    const VerifyResult result = verify_schedule(ring_all_reduce(4, fused));
    EXPECT_TRUE(result.ok()) << "fused=" << fused << "\n" << result.summary();
  }
}

TEST(Verifier, AcceptsAliasedBuffersDeclaredEmpty) {
  // MSCCL declares the buffer an in-place one aliases with 0 chunks (o_chunks="0" for
  // All-Reduce); its size is the aliased memory's.
  Schedule all_reduce = ring_all_reduce(4, true);
  for (RankProgram& program : all_reduce.programs) program.output_chunks = 0;
  VerifyResult result = verify_schedule(all_reduce);
  EXPECT_TRUE(result.ok()) << result.summary();

  Schedule reduce_scatter = ring_reduce_scatter(4, true);
  for (RankProgram& program : reduce_scatter.programs) program.output_chunks = 0;
  result = verify_schedule(reduce_scatter);
  EXPECT_TRUE(result.ok()) << result.summary();

  reduce_scatter.inplace = false;
  EXPECT_TRUE(has_error(verify_schedule(reduce_scatter),
                        "rank 0: the output buffer has 0 chunks; reducescatter out of place with "
                        "4 chunks on 4 ranks needs 1"));
}

TEST(Verifier, ReportsDeletedStep) {
  Schedule schedule = ring_all_gather(4);
  schedule.programs[2].tbs[1].steps.pop_back();  // rank 2's last receive, of chunk 3
  const VerifyResult result = verify_schedule(schedule);
  EXPECT_FALSE(result.ok());
  EXPECT_TRUE(has_error(result,
                        "rank 2: output chunk 3 is missing (expected the data of rank 3, "
                        "chunk 3)"));
  EXPECT_TRUE(has_error(result,
                        "rank 1 tb 0 step 2 (s): its message to rank 2 on channel 0 "
                        "(1 chunk) is never received"));
  EXPECT_EQ(result.error_count, 2u);
}

TEST(Verifier, ReportsMissingDependencyAsReadOfEmptyChunk) {
  Schedule schedule = ring_all_gather(4);
  schedule.programs[1].tbs[0].steps[1].deps.clear();  // forwards chunk 0 before receiving it
  const VerifyResult result = verify_schedule(schedule);
  ASSERT_FALSE(result.ok());
  EXPECT_EQ(result.errors.front(),
            "rank 1 tb 0 step 1 (s): output chunk 0 holds no data yet (missing dependency on "
            "rank 1 tb 1 step 0 (r), which writes it?)");
  EXPECT_TRUE(has_error(result, "rank 2: output chunk 0 holds invalid data"));
}

TEST(Verifier, ReportsWrongAndOverwrittenChunks) {
  Schedule swapped = ring_all_gather(4);
  std::swap(swapped.programs[2].tbs[1].steps[0].dst_off,
            swapped.programs[2].tbs[1].steps[1].dst_off);
  VerifyResult result = verify_schedule(swapped);
  EXPECT_TRUE(has_error(result,
                        "rank 2: output chunk 0 holds rank 1's chunk 1, expected rank "
                        "0's chunk 0"));

  Schedule overwriting = ring_all_gather(4);
  overwriting.programs[2].tbs[1].steps[2].dst_off = 2;
  result = verify_schedule(overwriting);
  EXPECT_TRUE(has_error(result,
                        "rank 2 tb 1 step 2 (r): overwrites output chunk 2, which holds "
                        "rank 2's chunk 2, with rank 3's chunk 3"));
}

TEST(Verifier, ReportsDeadlockWithItsCycle) {
  Schedule schedule = mutual_wait();
  // A block whose step waits for a step that never runs.
  ThreadBlock waiter;
  waiter.steps = {nop({{0, 1}})};
  schedule.programs[0].tbs.push_back(waiter);
  const VerifyResult result = verify_schedule(schedule);
  EXPECT_EQ(result.steps_executed, 0u);
  ASSERT_FALSE(result.errors.empty());
  const std::string& deadlock = result.errors.front();
  EXPECT_TRUE(deadlock.starts_with("deadlock: 5 steps in 3 thread blocks cannot run")) << deadlock;
  EXPECT_NE(deadlock.find("rank 0 tb 0 step 0 (r) waits for a message from rank 1 on channel 0 "
                          "that is never sent (its sender is stuck at rank 1 tb 0 step 0 (r))"),
            std::string::npos)
      << deadlock;
  EXPECT_NE(deadlock.find("rank 0 tb 1 step 0 (nop) waits for rank 0 tb 0 step 1 (s), which "
                          "never runs"),
            std::string::npos)
      << deadlock;
  EXPECT_NE(deadlock.find("cycle: rank 0 tb 0 step 0 (r) -> rank 1 tb 0 step 0 (r) -> rank 0 "
                          "tb 0 step 0 (r)"),
            std::string::npos)
      << deadlock;
  EXPECT_TRUE(has_error(result, "rank 0: output chunk 1 is missing"));
}

TEST(Verifier, ReportsReceiveFromRankThatNeverSends) {
  Schedule schedule = ring_all_gather(4);
  schedule.programs[0].tbs[0].steps.pop_back();  // rank 0's last send, of chunk 2
  VerifyResult result = verify_schedule(schedule);
  EXPECT_TRUE(has_error(result,
                        "rank 1 tb 1 step 2 (r) waits for a message from rank 0 on "
                        "channel 0 that is never sent (rank 0 tb 0 finishes after "
                        "sending 2 messages)"));

  schedule.programs[0].tbs.erase(schedule.programs[0].tbs.begin());  // no sender at all
  result = verify_schedule(schedule);
  EXPECT_TRUE(has_error(result,
                        "rank 1 tb 1 step 0 (r) waits for a message from rank 0 on "
                        "channel 0 that is never sent (rank 0 has no thread block "
                        "sending to rank 1 on channel 0)"));
}

TEST(Verifier, ReportsCountMismatchNamingBothEnds) {
  Schedule schedule = ring_all_gather(4);
  schedule.programs[2].tbs[1].steps[0].count = 2;
  const VerifyResult result = verify_schedule(schedule);
  EXPECT_TRUE(has_error(result,
                        "rank 2 tb 1 step 0 (r): receives 2 chunks, but the matching "
                        "send rank 1 tb 0 step 0 (s) sent 1 chunk"));
}

TEST(Verifier, ReportsContributionAddedTwice) {
  Schedule schedule = ring_reduce_scatter(4, false);
  schedule.programs[1].tbs[0].steps.push_back(step(StepKind::reduce, kIn, 1, kOut, 0));
  const VerifyResult result = verify_schedule(schedule);
  EXPECT_TRUE(has_error(result,
                        "rank 1 tb 0 step 4 (re): adds rank 1's contribution to chunk 1 "
                        "twice (at output chunk 0)"));
  EXPECT_TRUE(has_error(result, "rank 1: output chunk 0 holds invalid data"));
}

TEST(Verifier, ReportsIncompleteSum) {
  Schedule schedule = ring_reduce_scatter(4, false);
  // Rank 2 forwards the partial sum of chunk 0 without adding its own contribution.
  schedule.programs[2].tbs[0].steps[1] = step(StepKind::recv_copy_send, kIn, 0, kIn, 0);
  const VerifyResult result = verify_schedule(schedule);
  EXPECT_TRUE(has_error(result, "rank 0: output chunk 0 sums ranks {0,1,3}, missing 2"));
  EXPECT_EQ(result.error_count, 1u) << result.summary();
}

TEST(Verifier, ReportsAddingDifferentChunks) {
  Schedule schedule = ring_all_reduce(4, true);
  schedule.programs[1].tbs[0].steps[1].src_off = 2;  // receives chunk 3
  const VerifyResult result = verify_schedule(schedule);
  EXPECT_TRUE(has_error(result,
                        "rank 1 tb 0 step 1 (rrs): adds rank 0's chunk 3 to rank 1's "
                        "chunk 2 (at output chunk 2)"));
}

TEST(Verifier, RejectsMalformedStructureWithoutRunning) {
  Schedule schedule = ring_all_gather(4);
  schedule.programs[0].tbs[0].send_peer = 9;
  schedule.programs[1].tbs[0].steps[0].src_off = 7;
  schedule.programs[2].tbs[0].steps[1].deps = {{5, 0}};
  schedule.programs[3].tbs[0].steps[1].deps = {{1, 40}};
  schedule.programs[3].tbs[1].steps[0].count = -1;
  schedule.programs[3].tbs[1].steps[1].kind = static_cast<StepKind>(42);
  schedule.programs[2].tbs[1].steps[1].dst_buf = static_cast<BufferKind>(7);
  schedule.programs[1].tbs[1].steps.push_back(send(kOut, 0));
  schedule.programs[1].tbs.push_back(block(2, -1));
  schedule.programs[2].tbs.push_back(block(-1, 2));
  schedule.programs[2].tbs[0].steps[0].deps = {{0, 0}};
  schedule.programs[0].tbs[1].steps[0].route = {0};
  const VerifyResult result = verify_schedule(schedule);
  EXPECT_EQ(result.steps_executed, 0u);
  for (const char* expected : {
           "rank 0 tb 0: send peer 9 is not a rank (0..3) nor -1",
           "rank 1 tb 0 step 0 (s): src output chunks [7, 8) lie outside the output buffer "
           "(4 chunks)",
           "rank 2 tb 0 step 1 (s): depends on tb 5, which does not exist (rank 2 has 3 thread "
           "blocks)",
           "rank 3 tb 0 step 1 (s): depends on tb 1 step 40, which does not exist (tb 1 has 3 "
           "steps)",
           "rank 3 tb 1 step 0 (r): count -1 is not positive",
           "rank 3 tb 1 step 1 (kind 42): unknown step kind",
           "rank 2 tb 1 step 1 (r): dst buffer 7 is not input, output or scratch",
           "rank 1 tb 1 step 3 (s): sends, but tb 1 has no send peer",
           "rank 1 tb 2: sends to rank 2 on channel 0, as tb 0 does already",
           "rank 2 tb 2: receive peer 2 is the rank itself",
           "rank 2 tb 0 step 0 (s): depends on step 0 of its own thread block",
           "rank 0 tb 1 step 0 (r): has a route but sends nothing",
       })
    EXPECT_TRUE(has_error(result, expected));
  EXPECT_EQ(result.error_count, 12u) << result.summary();
}

TEST(Verifier, RejectsInconsistentHeaderAndBuffers) {
  Schedule schedule = ring_all_gather(4);
  schedule.chunks = 6;
  EXPECT_TRUE(has_error(verify_schedule(schedule),
                        "chunks (6) is not a multiple of the rank count (4), as allgather "
                        "requires"));

  schedule = ring_all_gather(4);
  schedule.programs.pop_back();
  EXPECT_TRUE(has_error(verify_schedule(schedule), "the schedule has 4 ranks but 3 rank programs"));

  schedule = ring_all_gather(4);
  schedule.collective = support::Collective::broadcast;
  EXPECT_TRUE(has_error(verify_schedule(schedule),
                        "verifying broadcast schedules is not "
                        "supported"));

  schedule = ring_all_gather(4);
  schedule.programs[1].output_chunks = 3;
  schedule.programs[2].input_chunks = 1;  // the in-place input may be declared with its size
  schedule.programs[3].scratch_chunks = -2;
  const VerifyResult result = verify_schedule(schedule);
  EXPECT_TRUE(has_error(result,
                        "rank 1: the output buffer has 3 chunks; allgather in place "
                        "with 4 chunks on 4 ranks needs 4"));
  EXPECT_TRUE(has_error(result, "rank 3: the scratch buffer has -2 chunks"));
  EXPECT_EQ(result.steps_executed, 0u);
}

Schedule routed_ring_all_gather() {
  Schedule schedule = ring_all_gather(4);
  // make_ring(4): link 2r goes from gpu r to gpu r+1.
  for (int r = 0; r < 4; ++r)
    for (Step& step : schedule.programs[static_cast<std::size_t>(r)].tbs[0].steps)
      step.route = {static_cast<topology::LinkId>(2 * r)};
  return schedule;
}

TEST(Verifier, AcceptsContiguousRoutes) {
  const topology::Topology ring = topology::make_ring(4);
  const VerifyResult result = verify_schedule(routed_ring_all_gather(), &ring);
  EXPECT_TRUE(result.ok()) << result.summary();

  // Two hops through a switch.
  topology::Topology star("star");
  const topology::NodeId hub = star.add_node(topology::Node{"sw", topology::NodeKind::switch_});
  for (int r = 0; r < 4; ++r)
    star.add_duplex(
        star.add_node(topology::Node{"g" + std::to_string(r), topology::NodeKind::gpu, r}), hub,
        topology::LinkSpec{topology::LinkKind::nvswitch, 100, 1});
  Schedule schedule = ring_all_gather(4);
  for (int r = 0; r < 4; ++r)
    for (Step& step : schedule.programs[static_cast<std::size_t>(r)].tbs[0].steps)
      step.route = {static_cast<topology::LinkId>(2 * r),
                    static_cast<topology::LinkId>(2 * mod(r + 1, 4) + 1)};
  const VerifyResult star_result = verify_schedule(schedule, &star);
  EXPECT_TRUE(star_result.ok()) << star_result.summary();
}

TEST(Verifier, RejectsBrokenRoutes) {
  const topology::Topology ring = topology::make_ring(4);
  Schedule schedule = routed_ring_all_gather();
  schedule.programs[0].tbs[0].steps[0].route = {0, 4};
  schedule.programs[1].tbs[0].steps[0].route = {4};
  schedule.programs[2].tbs[0].steps[0].route = {99};
  const VerifyResult result = verify_schedule(schedule, &ring);
  EXPECT_EQ(result.steps_executed, 0u);
  EXPECT_TRUE(has_error(result,
                        "rank 0 tb 0 step 0 (s): route breaks between link 0 (gpu0 -> "
                        "gpu1) and link 4 (gpu2 -> gpu3)"));
  EXPECT_TRUE(has_error(result,
                        "rank 0 tb 0 step 0 (s): route ends with link 4 (gpu2 -> gpu3), "
                        "not at rank 1's GPU gpu1"));
  EXPECT_TRUE(has_error(result,
                        "rank 1 tb 0 step 0 (s): route starts with link 4 (gpu2 -> "
                        "gpu3), not at rank 1's GPU gpu1"));
  EXPECT_TRUE(has_error(result,
                        "rank 1 tb 0 step 0 (s): route ends with link 4 (gpu2 -> gpu3), "
                        "not at rank 2's GPU gpu2"));
  EXPECT_TRUE(has_error(result,
                        "rank 2 tb 0 step 0 (s): route link 99 does not exist (topology "
                        "'ring4' has 8 links)"));
  EXPECT_EQ(result.error_count, 5u) << result.summary();

  const topology::Topology bigger = topology::make_ring(8);
  EXPECT_TRUE(has_error(verify_schedule(routed_ring_all_gather(), &bigger),
                        "the schedule has 4 ranks but topology 'ring8' has 8 GPUs"));
}

TEST(Verifier, RejectsSchedulesBeyondItsLimitsBeforeAllocating) {
  // One rank, 2^27 chunks: each `re` over all of them reads two and writes one per chunk.
  Schedule schedule = header(support::Collective::all_gather, 1, true);
  schedule.chunks = 1 << 27;
  ThreadBlock tb = block(-1, -1);
  Step reduce = step(StepKind::reduce, kOut, 0, kOut, 0);
  reduce.count = 1 << 27;
  tb.steps = {reduce};
  schedule.programs.push_back(buffers(0, 1 << 27, {tb}));
  const VerifyResult result = verify_schedule(schedule);
  EXPECT_EQ(result.steps_executed, 0u);
  EXPECT_TRUE(has_error(result,
                        "the schedule reads and writes 402653184 chunks in all, more than the "
                        "verifier's limit of 134217728"));
}

TEST(Verifier, KeepsFirstErrorsAndCountsTheRest) {
  Schedule schedule = ring_all_gather(8);
  for (RankProgram& program : schedule.programs) program.tbs[1].steps.clear();
  for (RankProgram& program : schedule.programs) program.tbs[0].steps.resize(1);
  const VerifyResult result = verify_schedule(schedule);
  EXPECT_EQ(result.errors.size(), VerifyResult::kMaxReported);
  EXPECT_EQ(result.error_count, 8u + 8u * 7u);  // 8 unreceived messages, 7 missing chunks each
  EXPECT_TRUE(result.summary().ends_with("\n... and 44 more")) << result.summary();
}

TEST(Verifier, VerifiesLargeRingAllGatherQuickly) {
  const VerifyResult result = verify_schedule(ring_all_gather(256));
  EXPECT_TRUE(result.ok()) << result.summary();
  EXPECT_EQ(result.steps_executed, 2u * 256u * 255u);
}

}  // namespace
}  // namespace optiflow::schedule
