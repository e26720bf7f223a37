// The verifier's race analysis on hand-built schedules: two accesses to one chunk, at least one
// a write, that no chain of block order, dependencies and messages orders are reported with
// both steps and the chunk; accesses ordered only through other ranks are not.
#include <gtest/gtest.h>

#include <algorithm>
#include <string>
#include <utility>

#include "optiflow/schedule/verifier.hpp"
#include "schedule_builders.hpp"

namespace optiflow::schedule {
namespace {

using namespace testing_support;

constexpr BufferKind kScratch = BufferKind::scratch;

bool is_race(const std::string& error) {
  return error.starts_with("race on ");
}

std::size_t race_count(const VerifyResult& result) {
  return static_cast<std::size_t>(std::ranges::count_if(result.errors, is_race));
}

// Ring All-Gather on 3 ranks with 2 chunks each (6 in all): rank r's tb 0 sends its own chunks
// 2r, 2r+1, then forwards the two it received from rank r-1, each send depending on the
// receive of its chunk; tb 1 receives.
Schedule relay_ring() {
  Schedule schedule = header(support::Collective::all_gather, 3, true);
  schedule.chunks = 6;
  for (int r = 0; r < 3; ++r) {
    const int from = mod(r - 1, 3), before = mod(r - 2, 3);
    ThreadBlock sender = block(mod(r + 1, 3), -1), receiver = block(-1, from);
    sender.steps = {send(kOut, 2 * r), send(kOut, 2 * r + 1), send(kOut, 2 * from, {{1, 0}}),
                    send(kOut, 2 * from + 1, {{1, 1}})};
    receiver.steps = {recv(kOut, 2 * from), recv(kOut, 2 * from + 1), recv(kOut, 2 * before),
                      recv(kOut, 2 * before + 1)};
    schedule.programs.push_back(buffers(0, 6, {sender, receiver}));
  }
  return schedule;
}

TEST(VerifierRaces, AcceptsTheRelayRing) {
  const VerifyResult result = verify_schedule(relay_ring());
  EXPECT_TRUE(result.ok()) << result.summary();
}

TEST(VerifierRaces, RejectsARelayThatMayForwardAChunkBeforeItArrives) {
  // Rank 1 sends o[2], o[3], o[0], o[1]; without its dependency, the send of o[1] may run as
  // soon as o[0] has arrived, before o[1] has.
  Schedule schedule = relay_ring();
  schedule.programs[1].tbs[0].steps[3].deps.clear();
  const VerifyResult result = verify_schedule(schedule);
  EXPECT_FALSE(result.ok());
  EXPECT_TRUE(has_error(result,
                        "race on rank 1's output chunk 1: rank 1 tb 0 step 3 (s) reads it and "
                        "rank 1 tb 1 step 1 (r) writes it, and nothing orders the two steps (a "
                        "missing dependency?)"));
  EXPECT_EQ(race_count(result), 1u) << result.summary();
}

// Two ranks, All-Gather in place, 2 chunks. Rank 0 stages its chunk in scratch chunk 0, sends it,
// and reuses the scratch chunk for rank 1's chunk, which rank 1 sends only after receiving
// rank 0's: the reuse is ordered through rank 1 alone (no dependency on rank 0 says so).
Schedule scratch_reuse() {
  Schedule schedule = header(support::Collective::all_gather, 2, true);
  ThreadBlock stage = block(1, -1), unstage = block(-1, 1);
  stage.steps = {step(StepKind::copy, kOut, 0, kScratch, 0), send(kScratch, 0)};
  unstage.steps = {recv(kScratch, 0), step(StepKind::copy, kScratch, 0, kOut, 1)};
  RankProgram rank0 = buffers(0, 2, {stage, unstage});
  rank0.scratch_chunks = 1;
  ThreadBlock receiver = block(-1, 0), sender = block(0, -1);
  receiver.steps = {recv(kOut, 0)};
  sender.steps = {send(kOut, 1, {{0, 0}})};
  schedule.programs = {rank0, buffers(0, 2, {receiver, sender})};
  return schedule;
}

TEST(VerifierRaces, AcceptsAccessesOrderedThroughAnotherRank) {
  const VerifyResult result = verify_schedule(scratch_reuse());
  EXPECT_TRUE(result.ok()) << result.summary();
}

TEST(VerifierRaces, RejectsAReuseThatAnotherRankNoLongerOrders) {
  Schedule schedule = scratch_reuse();
  schedule.programs[1].tbs[1].steps[0].deps.clear();  // rank 1 sends at once
  const VerifyResult result = verify_schedule(schedule);
  // The symbolic execution's order happens to be a good one (rank 0 sends before it receives):
  // only the race analysis sees that another order overwrites the chunk before it is sent.
  EXPECT_TRUE(std::ranges::all_of(result.errors, is_race)) << result.summary();
  EXPECT_TRUE(has_error(result,
                        "race on rank 0's scratch chunk 0: rank 0 tb 0 step 1 (s) reads it and "
                        "rank 0 tb 1 step 0 (r) writes it"));
  // The two writes race too, but the write before the read is ordered before it, so the one
  // race between read and write already says what is missing.
  EXPECT_EQ(race_count(result), 1u) << result.summary();
}

TEST(VerifierRaces, NamesAliasedChunksAsEachStepDoes) {
  // Out of place, rank 0 copies its input into output chunk 0; in place that output chunk is
  // its input chunk 0, and the copy writes the chunk that the send reads unordered.
  Schedule schedule = header(support::Collective::all_gather, 2, true);
  ThreadBlock sender = block(1, -1), copier = block(-1, -1), receiver = block(-1, 1);
  sender.steps = {send(kIn, 0)};
  copier.steps = {step(StepKind::copy, kIn, 0, kOut, 0)};
  receiver.steps = {recv(kOut, 1)};
  ThreadBlock peer_receiver = block(-1, 0), peer_sender = block(0, -1);
  peer_receiver.steps = {recv(kOut, 0)};
  peer_sender.steps = {send(kOut, 1)};
  schedule.programs = {buffers(0, 2, {sender, copier, receiver}),
                       buffers(0, 2, {peer_receiver, peer_sender})};
  const VerifyResult result = verify_schedule(schedule);
  EXPECT_TRUE(has_error(result,
                        "race on rank 0's input chunk 0: rank 0 tb 0 step 0 (s) reads it and "
                        "rank 0 tb 1 step 0 (cpy) writes it (as output chunk 0)"))
      << result.summary();
}

TEST(VerifierRaces, ReportsEachRacingStepPairOnce) {
  // Rank 1 receives both chunks of rank 0 in one message of 2 and forwards them unordered.
  Schedule schedule = relay_ring();
  for (RankProgram& program : schedule.programs) {
    auto& sends = program.tbs[0].steps;
    auto& receives = program.tbs[1].steps;
    sends[0].count = sends[2].count = 2;
    sends.erase(sends.begin() + 3);
    sends.erase(sends.begin() + 1);
    receives[0].count = receives[2].count = 2;
    receives.erase(receives.begin() + 3);
    receives.erase(receives.begin() + 1);
    sends[1].deps = {{1, 0}};
  }
  EXPECT_TRUE(verify_schedule(schedule).ok()) << verify_schedule(schedule).summary();
  schedule.programs[2].tbs[0].steps[1].deps.clear();
  const VerifyResult result = verify_schedule(schedule);
  EXPECT_TRUE(has_error(result,
                        "race on rank 2's output chunk 2: rank 2 tb 0 step 1 (s) reads it and "
                        "rank 2 tb 1 step 0 (r) writes it"))
      << result.summary();
  EXPECT_EQ(race_count(result), 1u) << result.summary();
}

}  // namespace
}  // namespace optiflow::schedule
