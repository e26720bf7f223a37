// explore with a measurement injected (what --hw does, without hardware): measured times pick
// the winners, and a measurement that fails leaves the run what it was without one.
#include <gtest/gtest.h>
#include <unistd.h>

#include <filesystem>
#include <stdexcept>
#include <string>
#include <vector>

#include "../db/temp_db.hpp"
#include "optiflow/explore/explore.hpp"
#include "optiflow/propose/proposer.hpp"
#include "optiflow/schedule/schedule_io.hpp"
#include "optiflow/sim/simulator.hpp"
#include "optiflow/topology/topology_io.hpp"

namespace optiflow::explore {
namespace {

namespace fs = std::filesystem;
using db::test_support::TempDb;

class ExploreMeasureTest : public ::testing::Test {
 protected:
  ExploreOptions options(const TempDb& db) const {
    ExploreOptions o;
    o.topology = "ring4";
    o.sizes = {4096, 65536};
    o.budget = 32;  // two batches
    o.db_path = db.path();
    o.out_dir = out_.string();
    o.threads = 1;
    return o;
  }
  static ExploreResult run(const ExploreOptions& o) {
    return explore(o, [](const std::string&, const propose::ProposalContext& context) {
      return propose::make_offline_proposer(context);
    });
  }
  void TearDown() override { fs::remove_all(out_); }

  fs::path out_ = fs::temp_directory_path() / ("optiflow_measure_test_" + std::to_string(getpid()));
};

TEST_F(ExploreMeasureTest, FailedMeasurementsWarnAndLeaveTheSimulatedWinners) {
  TempDb plain_db, failing_db;
  const ExploreResult plain = run(options(plain_db));
  ExploreOptions o = options(failing_db);
  std::vector<std::string> warnings;
  int calls = 0;
  o.hw_backend = "mpi";
  o.hw_topk = 2;
  o.measure = [&](const schedule::Schedule&, const std::string&,
                  std::span<const std::uint64_t>) -> std::optional<std::vector<double>> {
    if (++calls % 2) throw std::runtime_error("the job failed (launcher exit status 1)");
    return std::nullopt;
  };
  o.warn = [&](const std::string& message) { warnings.push_back(message); };
  const ExploreResult failing = run(o);
  EXPECT_GE(calls, 2);
  EXPECT_LE(calls, 4);  // two per batch, each schedule once
  EXPECT_EQ(failing.measured, 0);
  EXPECT_EQ(failing.measure_failed, calls);
  ASSERT_EQ(warnings.size(), static_cast<std::size_t>(calls));
  EXPECT_NE(warnings[0].find("candidate "), std::string::npos) << warnings[0];
  EXPECT_NE(warnings[0].find("could not be measured on mpi: the job failed"), std::string::npos)
      << warnings[0];
  EXPECT_NE(warnings[1].find("no result"), std::string::npos) << warnings[1];
  EXPECT_EQ(failing.candidates, plain.candidates);
  ASSERT_EQ(failing.winners.size(), plain.winners.size());
  for (std::size_t s = 0; s < plain.winners.size(); ++s) {
    EXPECT_EQ(failing.winners[s].program_id, plain.winners[s].program_id);
    EXPECT_DOUBLE_EQ(failing.winners[s].simulated.time_us, plain.winners[s].simulated.time_us);
    EXPECT_EQ(failing.winners[s].measured_time_us, 0);
  }
}

TEST_F(ExploreMeasureTest, TheFastestMeasuredCandidateWinsEverySizeOnceOneIsMeasured) {
  TempDb db;
  ExploreOptions o = options(db);
  std::vector<std::string> hashes;
  o.hw_backend = "mpi";
  o.hw_topk = 1;
  // Each schedule measured is faster than the last, whatever the simulator says.
  o.measure = [&](const schedule::Schedule& schedule, const std::string& topology,
                  std::span<const std::uint64_t> sizes) -> std::optional<std::vector<double>> {
    EXPECT_EQ(topology, "ring4");
    EXPECT_EQ(sizes.size(), 2u);
    EXPECT_EQ(schedule.ranks, 4);
    hashes.push_back(schedule::schedule_hash(schedule));
    return std::vector<double>(sizes.size(), 1000.0 / static_cast<double>(hashes.size()));
  };
  const ExploreResult result = run(o);
  ASSERT_GE(hashes.size(), 1u);
  ASSERT_LE(hashes.size(), 2u);  // one per batch
  if (hashes.size() == 2) {
    EXPECT_NE(hashes[0], hashes[1]);
  }
  EXPECT_EQ(result.measured, static_cast<std::int64_t>(hashes.size()));
  ASSERT_EQ(result.winners.size(), 2u);
  for (const SizeWinner& w : result.winners) {
    EXPECT_DOUBLE_EQ(w.measured_time_us, 1000.0 / static_cast<double>(hashes.size()));
    EXPECT_GT(w.simulated.time_us, 0);  // the winner's simulated time, kept beside
  }
  EXPECT_EQ(result.winners[0].program_id, result.winners[1].program_id);
}

// --hw reports how well the pre-screen predicted its own measurements: on a machine exactly
// twice as slow as the simulation, every simulated time is half the measured one (|error| 50%)
// and every pick is the measured best.
TEST_F(ExploreMeasureTest, ReportsThePrescreenAgainstItsOwnMeasurements) {
  TempDb db;
  ExploreOptions o = options(db);
  o.hw_backend = "mpi";
  o.hw_topk = 3;
  const topology::Topology ring4 = topology::load_topology("ring4");
  o.measure = [&](const schedule::Schedule& schedule, const std::string&,
                  std::span<const std::uint64_t> sizes) -> std::optional<std::vector<double>> {
    std::vector<double> times;
    for (const sim::SimResult& r : sim::Simulator(ring4, schedule).sweep(sizes))
      times.push_back(2 * r.time_us);
    return times;
  };
  const ExploreResult result = run(o);
  ASSERT_TRUE(result.hw_fidelity);
  const sim::FidelityReport& f = *result.hw_fidelity;
  EXPECT_EQ(f.points, static_cast<std::size_t>(result.measured) * o.sizes.size());
  EXPECT_NEAR(f.median_error, 0.5, 1e-9);
  EXPECT_NEAR(f.worst_error, 0.5, 1e-9);
  ASSERT_EQ(f.groups.size(), o.sizes.size());  // one per size, of every measured schedule
  EXPECT_EQ(f.picks_best, f.groups.size());
  EXPECT_DOUBLE_EQ(f.worst_regret, 1.0);
  EXPECT_FALSE(run(options(db)).hw_fidelity);  // nothing measured, nothing reported
}

}  // namespace
}  // namespace optiflow::explore
