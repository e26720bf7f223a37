// The host model's topology, the runtime costs it carries, and the fit: a closed form for one
// transfer, and the fit recovering a machine from schedules "measured" on it.
#include "optiflow/sim/host_model.hpp"

#include <gtest/gtest.h>

#include <cmath>

#include "optiflow/compiler/compiler.hpp"
#include "optiflow/sim/simulator.hpp"
#include "optiflow/support/error.hpp"
#include "optiflow/topology/generators.hpp"
#include "optiflow/topology/topology_io.hpp"

namespace optiflow::sim {
namespace {

using topology::MessageBand;

HostModel machine() {
  HostModel m;
  m.launch_us = 8;
  m.step_us = 1.5;
  m.send_GBps = 40;
  m.recv_GBps = 6;
  m.memory_GBps = 40;
  m.bands = {MessageBand{4096, 0.5, 1.0}, MessageBand{65536, 3.0, 0.9},
             MessageBand{524288, 2.0, 1.0}, MessageBand{0, 4.0, 0.6}};
  return m;
}

schedule::Schedule compiled(const std::string& program, int ranks) {
  compiler::CompileOptions options;
  return compiler::compile_program(program, "test.ofl", topology::make_fullmesh(ranks), options)
      .schedule;
}

TEST(HostModel, TopologyRoundTripsThroughJson) {
  const topology::Topology topo = machine().topology(8, "host8");
  EXPECT_EQ(topo.rank_count(), 8);
  EXPECT_EQ(topo.link_count(), 17u);  // a link each way per rank, one memory link
  EXPECT_EQ(topology::parse_topology_json(topology::write_topology_json(topo), "t.json"), topo);
}

// Two ranks, one message each way at once: launch, then the sender's core works on the send
// (the step's overhead and the band's alpha), then the bytes at the slowest of send, memory
// (which both messages cross, one after the other) and receive, scaled by the band's factor;
// then the receiver's core works on the receive (overhead and alpha again), once the data has
// arrived.
TEST(HostModel, OneExchangeCostsItsClosedForm) {
  const HostModel m = machine();
  const topology::Topology topo = m.topology(2, "host2");
  const schedule::Schedule s = schedule::without_routes(compiled("direct over all", 2));
  const Simulator simulator(topo, s);
  for (std::uint64_t size : {std::uint64_t{2048}, std::uint64_t{1} << 24}) {
    const double message = static_cast<double>(size) / 2;
    const MessageBand& band = *topo.runtime()->band_for(message);
    const double memory_us = message / (m.memory_GBps * 1e3 * band.bw_factor);
    const double recv_us = message / (m.recv_GBps * 1e3 * band.bw_factor);
    // The second message waits for the first on the memory link, then takes the slower of the
    // two links for its bytes.
    const double expected =
        m.launch_us + 2 * (m.step_us + band.alpha_us) + memory_us + std::max(memory_us, recv_us);
    EXPECT_NEAR(simulator.run(size).time_us, expected, 1e-6 * expected) << size;
  }
}

// The MPI runner progresses all of a rank's thread blocks on one core: with three ranks each
// sends twice and receives twice, and the four steps pay their overhead one after the other
// (the data takes no time here); on a GPU, where blocks run side by side, a send and then a
// receive.
TEST(HostModel, ARanksStepsPayTheirOverheadInTurn) {
  HostModel m;
  m.launch_us = 5;
  m.step_us = 100;
  m.send_GBps = m.recv_GBps = m.memory_GBps = 1e6;
  m.bands = {MessageBand{0, 0, 1.0}};
  topology::Topology topo = m.topology(3, "host3");
  const schedule::Schedule s = schedule::without_routes(compiled("direct over all", 3));
  EXPECT_NEAR(Simulator(topo, s).run(3072).time_us, m.launch_us + 4 * m.step_us, 0.01);
  topology::RuntimeCosts side_by_side = *topo.runtime();
  side_by_side.serial_steps = false;
  topo.set_runtime(side_by_side);
  EXPECT_NEAR(Simulator(topo, s).run(3072).time_us, m.launch_us + 2 * m.step_us, 0.01);
}

// Every rank sends as much as it receives in these schedules, so the fit may swap the send and
// receive links; what it must get right is the machine: the slower per-rank link, the shared
// memory system, and the times of a schedule at a rank count it never saw.
TEST(HostModel, FitRecoversTheMachineItsMeasurementsCameFrom) {
  const HostModel truth = machine();
  auto measure = [&](const std::string& program, int ranks) {
    MeasuredSchedule m{compiled(program, ranks), {}};
    const topology::Topology topo = truth.topology(ranks, "truth");
    const Simulator simulator(topo, schedule::without_routes(m.schedule));
    for (std::uint64_t size : {4096, 32768, 262144, 1 << 21, 1 << 24})
      m.times_us.emplace_back(size, simulator.run(size).time_us);
    return m;
  };
  std::vector<MeasuredSchedule> measured;
  for (int ranks : {4, 8})
    for (const char* program : {"ring over all", "direct over all", "rd over all",
                                "pipeline 4; ring over all", "bruck over all"})
      measured.push_back(measure(program, ranks));
  FitOptions options;
  options.band_edges = {4096, 65536, 524288};  // the truth's bands
  const FitReport fit = fit_host_model(measured, options);
  EXPECT_LT(fit.median_error, 0.01);
  EXPECT_LT(fit.worst_error, 0.10);
  ASSERT_EQ(fit.residuals.size(), measured.size() * 5);
  const double slower = std::min(fit.model.send_GBps, fit.model.recv_GBps);
  EXPECT_NEAR(slower, truth.recv_GBps, 0.05 * truth.recv_GBps);
  EXPECT_NEAR(fit.model.memory_GBps, truth.memory_GBps, 0.05 * truth.memory_GBps);

  const MeasuredSchedule unseen = measure("channels 2; direct over all", 6);
  const topology::Topology topo = fit.model.topology(6, "fitted");
  const Simulator simulator(topo, schedule::without_routes(unseen.schedule));
  for (const auto& [size, time] : unseen.times_us)
    EXPECT_NEAR(simulator.run(size).time_us, time, 0.10 * time) << size;
}

TEST(HostModel, FitNeedsSomethingToFit) {
  EXPECT_THROW(fit_host_model({}, FitOptions{}), support::InputError);
}

}  // namespace
}  // namespace optiflow::sim
