// FlatSchedule, the one flattening that the verifier, the simulator and the runner walk: steps
// in one array, blocks and connections, deps and dependents as step ids, the k-th send of a
// connection matched with its k-th receive; structural errors name the rank, block and step.
#include "optiflow/schedule/flat_schedule.hpp"

#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "optiflow/support/error.hpp"
#include "schedule_builders.hpp"

namespace optiflow::schedule {
namespace {

using namespace testing_support;

std::vector<StepId> ids(std::span<const StepId> span) {
  return {span.begin(), span.end()};
}

// The InputError of flattening `schedule` after its "file: error: " prefix, or "" when it
// flattens.
std::string flattening_error(Schedule schedule) {
  schedule.name = "test.xml";
  try {
    const FlatSchedule flat(schedule);
  } catch (const support::InputError& e) {
    const std::string prefix = "test.xml: error: ";
    const std::string message = e.what();
    EXPECT_TRUE(message.starts_with(prefix)) << message;
    return message.substr(prefix.size());
  }
  return "";
}

TEST(FlatSchedule, LaysOutStepsAndBlocksInRankOrder) {
  // Ring All-Gather on 3 ranks: per rank tb 0 sends 2 steps, tb 1 receives 2.
  const Schedule schedule = ring_all_gather(3);
  const FlatSchedule flat(schedule);
  EXPECT_EQ(flat.step_count(), 12u);
  ASSERT_EQ(flat.blocks().size(), 6u);
  EXPECT_EQ(ids(flat.first_block()), (std::vector<StepId>{0, 2, 4, 6}));
  const FlatBlock& rank1_tb1 = flat.blocks()[3];
  EXPECT_EQ(rank1_tb1.rank, 1);
  EXPECT_EQ(rank1_tb1.index, 1);
  EXPECT_EQ(rank1_tb1.first, 6u);
  EXPECT_EQ(rank1_tb1.end, 8u);
  EXPECT_EQ(flat.id_of(1, {1, 1}), 7u);
  EXPECT_EQ(flat.rank_of(7), 1);
  EXPECT_EQ(flat.block_id(7), 3u);
  EXPECT_EQ(flat.index_in_block(7), 1);
  EXPECT_EQ(&flat.step(7), &schedule.programs[1].tbs[1].steps[1]);
}

TEST(FlatSchedule, ListsDepsAndDependentsAsStepIds) {
  Schedule schedule = ring_all_gather(3);
  // Rank 0: tb 0 step 1 already depends on tb 1 step 0; add a nop waiting for both sends.
  ThreadBlock waiter;
  waiter.steps = {nop({{0, 1}, {0, 0}})};
  schedule.programs[0].tbs.push_back(waiter);
  const FlatSchedule flat(schedule);
  const StepId send0 = flat.id_of(0, {0, 0}), send1 = flat.id_of(0, {0, 1});
  const StepId recv0 = flat.id_of(0, {1, 0}), nop_id = flat.id_of(0, {2, 0});
  EXPECT_EQ(ids(flat.deps(send1)), (std::vector<StepId>{recv0}));
  EXPECT_EQ(ids(flat.deps(nop_id)), (std::vector<StepId>{send1, send0}));
  EXPECT_EQ(ids(flat.dependents(recv0)), (std::vector<StepId>{send1}));
  EXPECT_EQ(ids(flat.dependents(send0)), (std::vector<StepId>{nop_id}));
  EXPECT_EQ(ids(flat.dependents(send1)), (std::vector<StepId>{nop_id}));
  EXPECT_TRUE(flat.deps(send0).empty());  // its block predecessor is not a dep
}

TEST(FlatSchedule, MatchesTheKthSendWithTheKthReceive) {
  const Schedule schedule = ring_all_gather(3);
  const FlatSchedule flat(schedule);
  ASSERT_EQ(flat.connections().size(), 3u);
  for (const FlatConnection& connection : flat.connections()) {
    EXPECT_EQ(connection.dst, mod(connection.src + 1, 3));
    EXPECT_EQ(flat.blocks()[connection.sender].rank, connection.src);
    EXPECT_EQ(flat.blocks()[connection.receiver].rank, connection.dst);
    EXPECT_EQ(connection.messages, 2u);
  }
  for (std::uint32_t k = 0; k < 2; ++k) {
    const StepId send = flat.id_of(2, {0, static_cast<std::int32_t>(k)});
    const StepId recv = flat.id_of(0, {1, static_cast<std::int32_t>(k)});
    EXPECT_EQ(flat.matching_receive(send), recv);
    EXPECT_EQ(flat.matching_send(recv), send);
    EXPECT_EQ(flat.message_index(send), k);
    EXPECT_EQ(flat.matching_send(send), kNoStep);
    EXPECT_EQ(flat.matching_receive(recv), kNoStep);
    EXPECT_EQ(flat.message_index(recv), kNone);
  }
}

TEST(FlatSchedule, MatchesPerChannelSkippingLocalSteps) {
  // Two ranks, two channels each way; rank 1's receiving blocks interleave copies and nops.
  Schedule schedule = header(support::Collective::all_gather, 2, true);
  schedule.chunks = 4;
  ThreadBlock channel0 = block(1, -1), channel1 = block(1, -1);
  channel1.channel = 1;
  channel0.steps = {send(kOut, 0), send(kOut, 1)};
  channel1.steps = {send(kOut, 0)};
  schedule.programs.push_back(buffers(0, 4, {channel0, channel1}));
  ThreadBlock from0 = block(-1, 0), from1 = block(-1, 0);
  from1.channel = 1;
  from0.steps = {nop({}), recv(kOut, 0), step(StepKind::copy, kOut, 0, kOut, 2), recv(kOut, 1)};
  from1.steps = {recv(kOut, 3)};
  schedule.programs.push_back(buffers(0, 4, {from1, from0}));
  const FlatSchedule flat(schedule);
  EXPECT_EQ(flat.matching_receive(flat.id_of(0, {0, 0})), flat.id_of(1, {1, 1}));
  EXPECT_EQ(flat.matching_receive(flat.id_of(0, {0, 1})), flat.id_of(1, {1, 3}));
  EXPECT_EQ(flat.matching_receive(flat.id_of(0, {1, 0})), flat.id_of(1, {0, 0}));
  EXPECT_EQ(flat.matching_send(flat.id_of(1, {1, 2})), kNoStep);
  EXPECT_EQ(flat.blocks()[flat.first_block()[1] + 1].recv_connection,
            flat.blocks()[flat.first_block()[0]].send_connection);
}

TEST(FlatSchedule, ForwardsThroughBlocksThatReceiveAndSend) {
  // 3 ranks in a line: 0 sends to 1, which forwards with rcs to 2.
  Schedule schedule = header(support::Collective::all_gather, 3, true);
  ThreadBlock source = block(1, -1), relay = block(2, 0), sink = block(-1, 1);
  source.steps = {send(kOut, 0)};
  relay.steps = {step(StepKind::recv_copy_send, kOut, 0, kOut, 0)};
  sink.steps = {recv(kOut, 0)};
  schedule.programs = {buffers(0, 3, {source}), buffers(0, 3, {relay}), buffers(0, 3, {sink})};
  const FlatSchedule flat(schedule);
  EXPECT_EQ(flat.matching_send(1), 0u);
  EXPECT_EQ(flat.matching_receive(0), 1u);
  EXPECT_EQ(flat.matching_receive(1), 2u);
  EXPECT_EQ(flat.matching_send(2), 1u);
}

TEST(FlatSchedule, RejectsStructureItCannotFlattenNamingThePlace) {
  Schedule schedule = ring_all_gather(3);
  schedule.programs[1].tbs[0].send_peer = 7;
  EXPECT_EQ(flattening_error(schedule), "rank 1 tb 0: peer 7 is not another rank");

  schedule = ring_all_gather(3);
  schedule.programs[2].tbs[1].recv_peer = 2;
  EXPECT_EQ(flattening_error(schedule), "rank 2 tb 1: peer 2 is not another rank");

  schedule = ring_all_gather(3);
  schedule.programs[0].tbs.push_back(block(1, -1));
  EXPECT_EQ(flattening_error(schedule),
            "rank 0 tb 2: another block (tb 0) already sends to rank 1 on channel 0");

  schedule = ring_all_gather(3);
  schedule.programs[1].tbs[0].steps[1].deps = {{1, 5}};
  EXPECT_EQ(flattening_error(schedule),
            "rank 1 tb 0 step 1: dependency on tb 1 step 5, which does not exist");

  schedule = ring_all_gather(3);
  schedule.programs[1].tbs[1].steps.push_back(send(kOut, 0));
  EXPECT_EQ(flattening_error(schedule),
            "rank 1 tb 1 step 2 (s): sends, but the block has no send peer");

  schedule = ring_all_gather(3);
  schedule.programs.pop_back();
  EXPECT_EQ(flattening_error(schedule), "the schedule has 3 ranks but 2 rank programs");
}

TEST(FlatSchedule, RejectsOrKeepsUnpairedMessages) {
  Schedule extra_send = ring_all_gather(3);
  extra_send.programs[0].tbs[0].steps.push_back(send(kOut, 0));
  EXPECT_EQ(flattening_error(extra_send),
            "rank 0 tb 0 step 2 (s): its message to rank 1 on channel 0 is never received "
            "(rank 0 sends 3 messages to rank 1 on channel 0, which receives 2)");
  const FlatSchedule kept(extra_send, UnpairedMessages::keep);
  EXPECT_EQ(kept.matching_receive(kept.id_of(0, {0, 2})), kNoStep);
  EXPECT_EQ(kept.matching_receive(kept.id_of(0, {0, 1})), kept.id_of(1, {1, 1}));
  EXPECT_EQ(kept.message_index(kept.id_of(0, {0, 2})), 2u);
  EXPECT_EQ(kept.connections()[kept.blocks()[0].send_connection].messages, 2u);

  Schedule extra_receive = ring_all_gather(3);
  extra_receive.programs[2].tbs[1].steps.push_back(recv(kOut, 2));
  EXPECT_EQ(flattening_error(extra_receive),
            "rank 2 tb 1 step 2 (r): no message from rank 1 on channel 0 is left for it "
            "(rank 1 sends 2 messages to rank 2 on channel 0, which receives 3)");

  Schedule no_sender = ring_all_gather(3);
  no_sender.programs[0].tbs.erase(no_sender.programs[0].tbs.begin());
  EXPECT_EQ(flattening_error(no_sender),
            "rank 1 tb 1 step 0 (r): no message from rank 0 on channel 0 is left for it "
            "(rank 0 sends 0 messages to rank 1 on channel 0, which receives 2)");
  const FlatSchedule keeps_all(no_sender, UnpairedMessages::keep);
  EXPECT_EQ(keeps_all.matching_send(keeps_all.id_of(1, {1, 0})), kNoStep);

  // A block at one end only is fine while it moves no data.
  Schedule idle = ring_all_gather(3);
  idle.programs[0].tbs.push_back(block(2, -1));
  EXPECT_EQ(flattening_error(idle), "");
}

}  // namespace
}  // namespace optiflow::schedule
