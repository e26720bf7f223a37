// replicate_instances: MSCCL's instances keep a schedule correct, with more channels and
// finer chunks, and cut only the steps that span a rank's slice.
#include <gtest/gtest.h>

#include <set>
#include <stdexcept>
#include <string>
#include <tuple>

#include "../compiled_schedule.hpp"
#include "optiflow/schedule/schedule.hpp"
#include "optiflow/schedule/verifier.hpp"
#include "optiflow/sim/simulator.hpp"
#include "optiflow/topology/generators.hpp"
#include "schedule_builders.hpp"

namespace optiflow::schedule {
namespace {

using optiflow::testing_support::compiled;
using support::Collective;
using testing_support::ring_all_gather;

std::set<int> channels_of(const RankProgram& program) {
  std::set<int> channels;
  for (const ThreadBlock& tb : program.tbs) channels.insert(tb.channel);
  return channels;
}

TEST(Instances, RingAllGatherCopiesVerifyOnChannelsOfTheirOwn) {
  for (const bool inplace : {true, false}) {
    const Schedule ring = ring_all_gather(4, inplace);
    const Schedule three = replicate_instances(ring, 3);
    const VerifyResult result = verify_schedule(three);
    EXPECT_TRUE(result.ok()) << result.summary();
    EXPECT_EQ(three.chunks, 3 * ring.chunks);
    EXPECT_EQ(three.step_count(), 3 * ring.step_count());  // one-chunk steps are never cut
    EXPECT_EQ(three.programs[0].output_chunks, 3 * ring.programs[0].output_chunks);
    EXPECT_EQ(channels_of(three.programs[0]), (std::set<int>{0, 1, 2}));
  }
}

TEST(Instances, OneInstanceIsTheScheduleAndZeroIsRefused) {
  const Schedule ring = ring_all_gather(4);
  EXPECT_EQ(replicate_instances(ring, 1), ring);
  EXPECT_THROW(replicate_instances(ring, 0), std::invalid_argument);
}

// Recursive doubling sends runs of chunks that span several ranks' slices: each copy's piece
// of a run is cut at the slices' edges, and every collective's buffers keep their meaning.
TEST(Instances, MultiChunkStepsAreCutAtSliceEdgesForEveryCollective) {
  for (const Collective collective :
       {Collective::all_gather, Collective::reduce_scatter, Collective::all_reduce}) {
    const Schedule rd = compiled("rd over all", "fullmesh8", collective);
    const Schedule two = replicate_instances(rd, 2);
    const VerifyResult result = verify_schedule(two);
    EXPECT_TRUE(result.ok()) << to_string(collective) << "\n" << result.summary();
    EXPECT_GE(two.step_count(), 2 * rd.step_count());
  }
}

// Where nothing limits a channel, copies share the links the one schedule used: the time
// changes by per-step costs only, never by the bandwidth term.
TEST(Instances, CopiesShareTheLinksOfTheOneSchedule) {
  const topology::Topology ring8 = *topology::make_builtin_topology("ring8");
  const Schedule ring = compiled("ring over all", "ring8", Collective::all_gather);
  const std::uint64_t size = std::uint64_t{1} << 30;
  const double one = sim::Simulator(ring8, ring).run(size).time_us;
  const double two = sim::Simulator(ring8, replicate_instances(ring, 2)).run(size).time_us;
  EXPECT_NEAR(two, one, 0.05 * one);
}

}  // namespace
}  // namespace optiflow::schedule
