// The simulator against closed forms: ring, direct, recursive doubling and k-ary trees in the
// alpha-beta model (and in the flow model, where no link is shared), the per-step overhead,
// max-min sharing and FIFO serialisation on hand-built topologies, an MSCCL XML file, sweeps,
// determinism, the parallel batch, the timeline, the critical path and link usage.
#include "optiflow/sim/simulator.hpp"

#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <limits>
#include <numeric>
#include <ostream>
#include <set>
#include <sstream>
#include <string>
#include <utility>
#include <vector>

#include "optiflow/compiler/compiler.hpp"
#include "optiflow/schedule/msccl_xml.hpp"
#include "optiflow/support/error.hpp"
#include "optiflow/support/sizes.hpp"
#include "optiflow/topology/generators.hpp"

namespace optiflow::sim {

// GoogleTest prints parameters with this (found by argument-dependent lookup).
void PrintTo(Model model, std::ostream* out) {
  *out << to_string(model);
}

namespace {

using schedule::BufferKind;
using schedule::Schedule;
using schedule::Step;
using schedule::StepKind;
using schedule::StepRef;
using schedule::ThreadBlock;
using support::Collective;
using topology::LinkSpec;
using topology::NodeKind;
using topology::Topology;

// The generic link of ring<N> and fullmesh<N> (kGenericLink in core/topology/src/generators.cpp).
constexpr double kAlphaUs = 1.0;
constexpr double kBwGBps = 25.0;
constexpr double kBytesPerUsPerGBps = 1e3;
constexpr double kBwBytesPerUs = kBwGBps * kBytesPerUsPerGBps;

// What the Simple protocol adds (NCCL's tuner, core/topology/src/protocol.cpp): a launch cost
// per collective and a latency per step; the generic link is NVLink-class.
const topology::ProtocolCosts& kSimple = topology::protocol_costs(topology::Protocol::simple);
const double kLaunchUs = kSimple.launch_us;
const double kStepUs = kSimple.step_latency(topology::HopClass::nvlink);
const double kHopUs = kAlphaUs + kStepUs;

const std::vector<std::uint64_t> kSizes{1024, 12345, (1u << 20) + 3, std::uint64_t{1} << 30};

void expect_close(double actual, double expected, const std::string& what) {
  EXPECT_NEAR(actual, expected, 1e-9 * std::abs(expected)) << what;
}

Topology builtin(const std::string& name) {
  return *topology::make_builtin_topology(name);
}

Schedule compile(const std::string& program, const Topology& topology,
                 Collective collective = Collective::all_gather) {
  compiler::CompileOptions options;
  options.collective = collective;
  return compiler::compile_program(program, "test.ofl", topology, options).schedule;
}

// Every size with the Simple protocol, whose costs the closed forms spell out.
SimOptions with_model(Model model) {
  SimOptions options;
  options.model = model;
  options.protocol = topology::Protocol::simple;
  return options;
}

// No protocol costs at all: the network model alone.
SimOptions bare(Model model) {
  SimOptions options = with_model(model);
  options.protocol_costs =
      topology::ProtocolCosts{topology::Protocol::simple, 0, {0, 0, 0}, {1, 1, 1}};
  return options;
}

Step make_step(StepKind kind, int offset, int count, std::vector<StepRef> deps = {},
               std::vector<topology::LinkId> route = {}) {
  Step step;
  step.kind = kind;
  step.src_buf = BufferKind::output;
  step.src_off = offset;
  step.dst_buf = BufferKind::output;
  step.dst_off = offset;
  step.count = count;
  step.deps = std::move(deps);
  step.route = std::move(route);
  return step;
}

ThreadBlock block(int send_peer, int recv_peer, int channel, std::vector<Step> steps) {
  ThreadBlock tb;
  tb.send_peer = send_peer;
  tb.recv_peer = recv_peer;
  tb.channel = channel;
  tb.steps = std::move(steps);
  return tb;
}

Schedule empty_schedule(std::string name, Collective collective, int ranks, int chunks) {
  Schedule schedule;
  schedule.name = std::move(name);
  schedule.collective = collective;
  schedule.ranks = ranks;
  schedule.chunks = chunks;
  schedule.programs.resize(static_cast<std::size_t>(ranks));
  for (auto& program : schedule.programs) program.output_chunks = chunks;
  return schedule;
}

std::size_t sends_in(const Schedule& schedule) {
  std::size_t sends = 0;
  for (const auto& program : schedule.programs)
    for (const auto& tb : program.tbs)
      for (const auto& step : tb.steps) sends += schedule::step_sends(step.kind) ? 1 : 0;
  return sends;
}

// Every field of a result, doubles in hexadecimal, so equal text means bit-identical results.
std::string fingerprint(const SimResult& r) {
  std::ostringstream out;
  out << std::hexfloat << r.size_bytes << ' ' << r.time_us << ' ' << r.algbw_GBps << ' '
      << r.busbw_GBps << '\n';
  for (const auto& c : r.critical_path)
    out << "c " << c.rank << ' ' << c.tb << ' ' << c.step << ' ' << static_cast<int>(c.kind) << ' '
        << c.start_us << ' ' << c.end_us << '\n';
  for (const auto& l : r.links)
    out << "l " << l.link << ' ' << l.busy_us << ' ' << l.bytes << ' ' << l.utilisation << '\n';
  for (const auto& t : r.timeline) {
    out << "t " << t.rank << ' ' << t.tb << ' ' << t.step << ' ' << t.peer << ' ' << t.start_us
        << ' ' << t.end_us << ' ' << t.bytes;
    for (auto link : t.route) out << ' ' << link;
    out << '\n';
  }
  return out.str();
}

class SimClosedForm : public ::testing::TestWithParam<Model> {};

// Unidirectional ring on ring<N>: N-1 rounds, each moving one chunk of S/N over one link that
// nothing else uses, after the launch cost L, each step paying the protocol's latency l:
// L + (N-1) * (a + l + (S/N)/B).
TEST_P(SimClosedForm, RingAllGatherOnRing) {
  for (int n = 2; n <= 16; ++n) {
    const Topology topo = builtin("ring" + std::to_string(n));
    ASSERT_EQ(topo.link(0).alpha_us, kAlphaUs);
    ASSERT_EQ(topo.link(0).bw_GBps, kBwGBps);
    const Schedule schedule = compile("ring over all", topo);
    ASSERT_EQ(schedule.chunks, n);
    ASSERT_EQ(sends_in(schedule), static_cast<std::size_t>(n * (n - 1)));
    const Simulator sim(topo, schedule, with_model(GetParam()));
    for (std::uint64_t size : kSizes) {
      const double expected =
          kLaunchUs + (n - 1) * (kHopUs + (static_cast<double>(size) / n) / kBwBytesPerUs);
      expect_close(sim.run(size).time_us, expected,
                   "ring" + std::to_string(n) + " at " + std::to_string(size));
    }
  }
}

// The same on a ring large enough that the simulator stores its steps in wavefront order
// (step_graph.cpp, above 65,536 steps) rather than in schedule order: the formula still holds,
// the critical path is the N-1 hops of one chunk, and the timeline lists every transfer.
TEST_P(SimClosedForm, RingAllGatherOnARingBigEnoughToBeReordered) {
  const int n = 200;
  const Topology topo = builtin("ring" + std::to_string(n));
  const Schedule schedule = compile("ring over all", topo);
  ASSERT_GT(schedule.step_count(), std::size_t{1} << 16);
  SimOptions options = with_model(GetParam());
  options.record_timeline = true;
  const Simulator sim(topo, schedule, options);
  for (std::uint64_t size : {std::uint64_t{1} << 10, std::uint64_t{1} << 30}) {
    const SimResult r = sim.run(size);
    const double expected =
        kLaunchUs + (n - 1) * (kHopUs + (static_cast<double>(size) / n) / kBwBytesPerUs);
    expect_close(r.time_us, expected, "ring" + std::to_string(n) + " at " + std::to_string(size));
    EXPECT_EQ(r.timeline.size(), sends_in(schedule));
    ASSERT_FALSE(r.critical_path.empty());
    EXPECT_EQ(r.critical_path.back().end_us, r.time_us);
    std::set<std::int32_t> ranks;
    for (const CriticalStep& step : r.critical_path) ranks.insert(step.rank);
    EXPECT_EQ(ranks.size(), static_cast<std::size_t>(n));  // one chunk's way around the ring
  }
}

// Direct exchange on fullmesh<N>: every rank sends its S/N to each of the N-1 others at time 0,
// each on its own link, so no transfer waits for another: L + a + l + (S/N)/B.
TEST_P(SimClosedForm, DirectExchangeOnFullMesh) {
  for (int n = 2; n <= 16; ++n) {
    const Topology topo = builtin("fullmesh" + std::to_string(n));
    const Schedule schedule = compile("direct over all", topo);
    ASSERT_EQ(sends_in(schedule), static_cast<std::size_t>(n * (n - 1)));
    const Simulator sim(topo, schedule, with_model(GetParam()));
    for (std::uint64_t size : kSizes) {
      const double expected = kLaunchUs + kHopUs + (static_cast<double>(size) / n) / kBwBytesPerUs;
      expect_close(sim.run(size).time_us, expected,
                   "fullmesh" + std::to_string(n) + " at " + std::to_string(size));
    }
  }
}

// Recursive doubling on fullmesh<2^k>. The compiler coalesces what a rank has gathered before
// round i (2^i chunks, contiguous in rank order) into one message, so every rank has k sends
// of 1, 2, ..., 2^(k-1) chunks and k receives (2kN steps), and round i takes
// a + l + 2^i (S/N)/B, after the launch cost L.
TEST_P(SimClosedForm, RecursiveDoublingOnFullMesh) {
  for (int k = 1; k <= 4; ++k) {
    const int n = 1 << k;
    const Topology topo = builtin("fullmesh" + std::to_string(n));
    const Schedule schedule = compile("rd over all", topo);
    ASSERT_EQ(schedule.step_count(), static_cast<std::size_t>(2 * k * n)) << "rd on fullmesh" << n;
    for (const auto& program : schedule.programs) {
      std::vector<int> counts;
      for (const auto& tb : program.tbs)
        for (const auto& step : tb.steps)
          if (schedule::step_sends(step.kind)) counts.push_back(step.count);
      std::sort(counts.begin(), counts.end());
      for (int i = 0; i < k; ++i) ASSERT_EQ(counts.at(static_cast<std::size_t>(i)), 1 << i);
    }
    const Simulator sim(topo, schedule, with_model(GetParam()));
    for (std::uint64_t size : kSizes) {
      double expected = kLaunchUs;
      for (int i = 0; i < k; ++i)
        expected += kHopUs + (1 << i) * (static_cast<double>(size) / n) / kBwBytesPerUs;
      expect_close(sim.run(size).time_us, expected,
                   "rd on fullmesh" + std::to_string(n) + " at " + std::to_string(size));
    }
  }
}

// A k-ary heap-shaped broadcast of the whole buffer (one chunk) on fullmesh<N>: rank x receives
// from (x-1)/k in one block, and one block per child sends after that receive. Every hop has
// its own link, so each level costs a + l + S/B, after the launch cost L.
Schedule kary_broadcast(int ranks, int arity) {
  Schedule schedule = empty_schedule("kary-broadcast", Collective::broadcast, ranks, 1);
  for (int x = 0; x < ranks; ++x) {
    auto& tbs = schedule.programs[static_cast<std::size_t>(x)].tbs;
    std::vector<StepRef> after_receive;
    if (x > 0) {
      tbs.push_back(block(-1, (x - 1) / arity, 0, {make_step(StepKind::recv, 0, 1)}));
      after_receive.push_back(StepRef{0, 0});
    }
    for (int child = arity * x + 1; child <= arity * x + arity && child < ranks; ++child)
      tbs.push_back(block(child, -1, 0, {make_step(StepKind::send, 0, 1, after_receive)}));
  }
  return schedule;
}

int heap_depth(int ranks, int arity) {
  int depth = 0;
  for (int x = ranks - 1; x > 0; x = (x - 1) / arity) ++depth;
  return depth;
}

TEST_P(SimClosedForm, KaryTreeBroadcastOnFullMesh) {
  for (int arity : {2, 3}) {
    for (int n : {2, 4, 7, 10, 13, 15, 16, 40}) {
      const Topology topo = builtin("fullmesh" + std::to_string(n));
      const Simulator sim(topo, kary_broadcast(n, arity), with_model(GetParam()));
      for (std::uint64_t size : kSizes) {
        const double expected =
            kLaunchUs + heap_depth(n, arity) * (kHopUs + static_cast<double>(size) / kBwBytesPerUs);
        expect_close(sim.run(size).time_us, expected,
                     std::to_string(arity) + "-ary broadcast on fullmesh" + std::to_string(n));
      }
    }
  }
}

// A chain broadcast with recv-copy-send: rank x receives from x-1 and forwards in the same step,
// which completes when its connection takes the data; the next rank waits for it to arrive:
// L + (N-1) * (a + l + S/B).
TEST_P(SimClosedForm, ChainBroadcastWithRecvCopySend) {
  for (int n : {2, 3, 8, 16}) {
    const Topology topo = builtin("fullmesh" + std::to_string(n));
    Schedule schedule = empty_schedule("chain-broadcast", Collective::broadcast, n, 1);
    for (int x = 0; x < n; ++x) {
      const StepKind kind = x == 0      ? StepKind::send
                            : x + 1 < n ? StepKind::recv_copy_send
                                        : StepKind::recv;
      schedule.programs[static_cast<std::size_t>(x)].tbs.push_back(
          block(x + 1 < n ? x + 1 : -1, x > 0 ? x - 1 : -1, 0, {make_step(kind, 0, 1)}));
    }
    const Simulator sim(topo, schedule, with_model(GetParam()));
    for (std::uint64_t size : kSizes)
      expect_close(sim.run(size).time_us,
                   kLaunchUs + (n - 1) * (kHopUs + static_cast<double>(size) / kBwBytesPerUs),
                   "chain on fullmesh" + std::to_string(n));
  }
}

// The per-step overhead o: a step pays o after its prerequisites are met (simulator.cpp, start:
// a sending step hands its data over after o, any other step completes after o). A ring hop
// is a send (o, then a + l + S/N/B until the data arrives) and the matching receive, which
// starts on arrival and completes o later; the next send waits for that receive:
// L + (N-1) * (a + l + S/N/B + 2o). The direct exchange is one such hop.
TEST_P(SimClosedForm, PerStepOverhead) {
  for (double overhead_us : {0.5, 3.25}) {
    for (int n : {2, 5, 8, 16}) {
      const Topology ring = builtin("ring" + std::to_string(n));
      SimOptions options = with_model(GetParam());
      options.op_overhead_us = overhead_us;
      const Simulator sim(ring, compile("ring over all", ring), options);
      Topology ring_with_overhead = ring;
      ring_with_overhead.set_op_overhead_us(overhead_us);
      const Simulator from_topology(
          ring_with_overhead, compile("ring over all", ring_with_overhead), with_model(GetParam()));
      const Topology mesh = builtin("fullmesh" + std::to_string(n));
      const Simulator direct(mesh, compile("direct over all", mesh), options);
      for (std::uint64_t size : kSizes) {
        const double hop =
            kHopUs + (static_cast<double>(size) / n) / kBwBytesPerUs + 2 * overhead_us;
        expect_close(sim.run(size).time_us, kLaunchUs + (n - 1) * hop, "ring" + std::to_string(n));
        expect_close(from_topology.run(size).time_us, kLaunchUs + (n - 1) * hop,
                     "ring" + std::to_string(n) + ", topology's o");
        expect_close(direct.run(size).time_us, kLaunchUs + hop,
                     "direct on fullmesh" + std::to_string(n));
      }
    }
  }
}

INSTANTIATE_TEST_SUITE_P(Models, SimClosedForm, ::testing::Values(Model::alpha_beta, Model::flow),
                         [](const auto& info) {
                           return info.param == Model::flow ? "flow" : "alpha_beta";
                         });

// Ring on a100x16 (128 GPUs): each of the 16 host boundaries is one hop h.gpu7 -> h+1.gpu0
// over PCIe, NIC, rail leaf, spine, leaf, NIC, PCIe, at most 25 GB/s (the NIC); every other hop
// is a faster NVSwitch hop. Sends complete when their connection takes the data, so chunks
// move on without waiting for each other: with no data, the time is the launch cost plus the
// longest chunk's way around the ring: 127 hops, all but the one into its source, so for a
// source inside a host 111 NVSwitch hops and all 16 boundary hops. With data, each
// boundary link carries N-1 chunks of S/N one after another at 25 GB/s, and the chunks' way
// around adds at most that latency.
struct RingOnA100x16 {
  Topology topo = builtin("a100x16");
  Schedule schedule = compile("ring over all", topo);

  double latency_us() const {
    const auto& tbs = schedule.programs[7].tbs;
    const auto boundary = std::find_if(tbs.begin(), tbs.end(),
                                       [](const ThreadBlock& tb) { return tb.send_peer == 8; });
    double route_alpha_us = 0;
    for (topology::LinkId l : boundary->steps.front().route)
      route_alpha_us += topo.link(l).alpha_us;
    return kLaunchUs + 111 * kSimple.step_latency(topology::HopClass::nvlink) +
           16 * (route_alpha_us + kSimple.step_latency(topology::HopClass::net));
  }
  static double boundary_link_us(std::uint64_t size) {
    return 127 * (static_cast<double>(size) / 128) / (25.0 * kBytesPerUsPerGBps);
  }
};

TEST(SimRing, OnA100x16TakesOneChunksWayAroundWithNoData) {
  const RingOnA100x16 ring;
  for (Model model : {Model::alpha_beta, Model::flow})
    expect_close(Simulator(ring.topo, ring.schedule, with_model(model)).run(0).time_us,
                 ring.latency_us(), std::string(to_string(model)));
}

TEST(SimRing, OnA100x16RunsAtTheBoundaryLinksPace) {
  const RingOnA100x16 ring;
  for (Model model : {Model::alpha_beta, Model::flow}) {
    const Simulator sim(ring.topo, ring.schedule, with_model(model));
    for (std::uint64_t size : kSizes) {
      const double time_us = sim.run(size).time_us;
      EXPECT_GE(time_us, kLaunchUs + RingOnA100x16::boundary_link_us(size)) << size;
      EXPECT_LE(time_us, ring.latency_us() + RingOnA100x16::boundary_link_us(size) * (1 + 1e-9))
          << size;
    }
  }
}

// --- Sharing: hand-built topologies with senders joined to receivers through one switch. ---

struct Transfer {
  int from = 0, to = 0, count = 1;
};

// One send block per transfer on its own channel and the matching receive block.
Schedule transfers(int ranks, int chunks, const std::vector<Transfer>& list) {
  Schedule schedule = empty_schedule("transfers", Collective::all_gather, ranks, chunks);
  for (std::size_t i = 0; i < list.size(); ++i) {
    const int channel = static_cast<int>(i);
    const Transfer& t = list[i];
    schedule.programs[static_cast<std::size_t>(t.from)].tbs.push_back(
        block(t.to, -1, channel, {make_step(StepKind::send, 0, t.count)}));
    schedule.programs[static_cast<std::size_t>(t.to)].tbs.push_back(
        block(-1, t.from, channel, {make_step(StepKind::recv, 0, t.count)}));
  }
  return schedule;
}

// GPUs 0..senders-1 each with a link into one switch, and the switch's link to GPU `senders`
// (the shared link). `first_hop[i]` is sender i's link.
Topology star(const std::vector<LinkSpec>& first_hop, const LinkSpec& shared) {
  Topology topo("star");
  const int senders = static_cast<int>(first_hop.size());
  for (int r = 0; r <= senders; ++r)
    topo.add_node(topology::Node{"gpu" + std::to_string(r), NodeKind::gpu, r, 0, r});
  const topology::NodeId hub =
      topo.add_node(topology::Node{"switch", NodeKind::switch_, -1, 0, -1});
  for (int r = 0; r < senders; ++r)
    topo.add_link(static_cast<topology::NodeId>(r), hub, first_hop[static_cast<std::size_t>(r)]);
  topo.add_link(hub, static_cast<topology::NodeId>(senders), shared);
  topo.validate("star");
  return topo;
}

LinkSpec link_of(double bw_GBps, double alpha_us = 0) {
  return LinkSpec{topology::LinkKind::other, bw_GBps, alpha_us};
}

// End time of each sender's transfer, by sender rank.
std::vector<double> ends_by_sender(const SimResult& result, int senders) {
  std::vector<double> ends(static_cast<std::size_t>(senders), -1);
  for (const auto& t : result.timeline) ends.at(static_cast<std::size_t>(t.rank)) = t.end_us;
  return ends;
}

SimOptions flow_with_timeline() {
  SimOptions options = bare(Model::flow);
  options.record_timeline = true;
  return options;
}

TEST(SimFlow, TwoFlowsSharingOneLinkTakeTwiceAsLong) {
  const Topology topo = star({link_of(100), link_of(100)}, link_of(100));
  const std::uint64_t size = 1'000'000;
  const double alone_us = size / (100 * kBytesPerUsPerGBps);
  const SimResult one = Simulator(topo, transfers(3, 1, {{0, 2}}), flow_with_timeline()).run(size);
  expect_close(one.time_us, alone_us, "one flow");
  const SimResult two =
      Simulator(topo, transfers(3, 1, {{0, 2}, {1, 2}}), flow_with_timeline()).run(size);
  expect_close(two.time_us, 2 * alone_us, "two flows");
  for (double end : ends_by_sender(two, 2)) expect_close(end, 2 * alone_us, "each of two flows");
}

// Max-min: A crosses a 10 GB/s first hop and the shared 100 GB/s link, B only the shared link.
// A is held to 10 by its first hop, so B gets the other 90.
TEST(SimFlow, FlowLimitedElsewhereLeavesTheRestToTheOther) {
  const Topology topo = star({link_of(10), link_of(1000)}, link_of(100));
  const std::uint64_t size = 900'000;
  const SimResult result =
      Simulator(topo, transfers(3, 1, {{0, 2}, {1, 2}}), flow_with_timeline()).run(size);
  const auto ends = ends_by_sender(result, 2);
  expect_close(ends[1], size / (90 * kBytesPerUsPerGBps), "B at 90 GB/s");
  expect_close(ends[0], size / (10 * kBytesPerUsPerGBps), "A at 10 GB/s throughout");
  expect_close(result.time_us, ends[0], "the collective ends with A");
}

// Three flows of u, 2u, 3u bytes on one link of capacity C: all at C/3 until the first drains
// at 3u/C, then two at C/2 until the second drains at 3u/C + 2u/C = 5u/C, then the last alone:
// 5u/C + u/C = 6u/C.
TEST(SimFlow, ThreeStaggeredFlowsFinishAtTextbookTimes) {
  const Topology topo = star({link_of(100), link_of(100), link_of(100)}, link_of(100));
  const std::uint64_t size = 6'000'000;  // 6 chunks of u = 1e6 bytes
  const double unit_us = 1e6 / (100 * kBytesPerUsPerGBps);
  const Schedule schedule = transfers(4, 6, {{0, 3, 1}, {1, 3, 2}, {2, 3, 3}});
  const SimResult result = Simulator(topo, schedule, flow_with_timeline()).run(size);
  const auto ends = ends_by_sender(result, 3);
  expect_close(ends[0], 3 * unit_us, "u");
  expect_close(ends[1], 5 * unit_us, "2u");
  expect_close(ends[2], 6 * unit_us, "3u");
  expect_close(result.time_us, 6 * unit_us, "collective");
}

// `transfers(3, chunks, {{1, 2, other}})` plus two messages from rank 0 to rank 2 on one
// connection, of `first` and `second` chunks, both in flight at once.
Schedule two_messages_and_another(int chunks, int other, int first, int second) {
  Schedule schedule = transfers(3, chunks, {{1, 2, other}});
  schedule.programs[0].tbs.push_back(block(
      2, -1, 7,
      {make_step(StepKind::send, other, first), make_step(StepKind::send, other + first, second)}));
  schedule.programs[2].tbs.push_back(block(
      -1, 0, 7,
      {make_step(StepKind::recv, other, first), make_step(StepKind::recv, other + first, second)}));
  return schedule;
}

// A connection is one flow, whatever it has in flight: its two messages drain one after the
// other at the 20 GB/s of their first hop, leaving 80 GB/s of the shared 100 GB/s link to the
// other sender.
TEST(SimFlow, AConnectionIsOneFlowWhoseMessagesDrainInOrder) {
  const Topology topo = star({link_of(20), link_of(1000)}, link_of(100));
  const Schedule schedule = two_messages_and_another(6, 4, 1, 1);
  const std::uint64_t size = 6'000'000;  // 6 chunks of u = 1e6 bytes
  const double u = 1e6 / kBytesPerUsPerGBps;  // one chunk's time at 1 GB/s
  const SimResult result = Simulator(topo, schedule, flow_with_timeline()).run(size);
  ASSERT_EQ(result.timeline.size(), 3u);
  std::vector<double> ends;
  for (const auto& t : result.timeline) ends.push_back(t.end_us);
  std::sort(ends.begin(), ends.end());
  expect_close(ends[0], u / 20, "the first message");
  expect_close(ends[1], 4 * u / 80, "the other sender's four chunks at 80 GB/s");
  expect_close(ends[2], 2 * u / 20, "the second message, after the first");
}

// Messages of u and 3u on one connection and 3u from another sender: two flows, C/2 each. The
// first message ends at 2u/C, and the second takes its connection's place; the other sender's
// 2u left end at 2u/C + 4u/C = 6u/C, and the second message's last u alone at 7u/C.
TEST(SimFlow, AConnectionsNextMessageTakesItsPlaceWhenOneEnds) {
  const Topology topo = star({link_of(100), link_of(100)}, link_of(100));
  const Schedule schedule = two_messages_and_another(7, 3, 1, 3);
  const std::uint64_t size = 7'000'000;  // 7 chunks of u = 1e6 bytes
  const double u = 1e6 / (100 * kBytesPerUsPerGBps);
  const SimResult result = Simulator(topo, schedule, flow_with_timeline()).run(size);
  ASSERT_EQ(result.timeline.size(), 3u);
  std::vector<double> ends;
  for (const auto& t : result.timeline) ends.push_back(t.end_us);
  std::sort(ends.begin(), ends.end());
  expect_close(ends[0], 2 * u, "the first message");
  expect_close(ends[1], 6 * u, "the other sender's");
  expect_close(ends[2], 7 * u, "the second message");
}

// A route's links that no other route crosses limit it by the slowest of them, wherever it is
// on the route: here the second hop, 10 GB/s after a 1000 GB/s first hop.
TEST(SimFlow, TheSlowestOfARoutesOwnLinksLimitsIt) {
  const Topology topo = star({link_of(1000)}, link_of(10));
  const std::uint64_t size = 1'000'000;
  const SimResult result =
      Simulator(topo, transfers(2, 1, {{0, 1}}), flow_with_timeline()).run(size);
  expect_close(result.time_us, size / (10 * kBytesPerUsPerGBps), "at 10 GB/s");
}

// GPUs 0..3 in a line, links 0->1 and 1->2 at 100 GB/s, 2->3 at 150. A (0->2) and C (2->3) share
// no link, but B (1->3) shares one with each, so A leaving changes C's rate. While A runs, A
// and B split 1->2 at 50 each and C takes the 100 left on 2->3. A's u bytes end at u/50, when C
// has 2u left; then B and C split 2->3 at 75 until C ends, and B runs alone at 100.
TEST(SimFlow, AFlowLeavingChangesTheRateOfOneItSharesNoLinkWith) {
  Topology topo("line");
  for (int r = 0; r < 4; ++r)
    topo.add_node(topology::Node{"gpu" + std::to_string(r), NodeKind::gpu, r, 0, r});
  topo.add_link(0, 1, link_of(100));
  topo.add_link(1, 2, link_of(100));
  topo.add_link(2, 3, link_of(150));
  topo.validate("line");
  const std::uint64_t size = 9'000'000;  // 9 chunks of u = 1e6 bytes
  const double u = 1e6 / kBytesPerUsPerGBps;
  const Schedule schedule = transfers(4, 9, {{0, 2, 1}, {1, 3, 4}, {2, 3, 4}});
  const SimResult result = Simulator(topo, schedule, flow_with_timeline()).run(size);
  const auto ends = ends_by_sender(result, 3);
  expect_close(ends[0], u / 50, "A");
  expect_close(ends[2], u / 50 + 2 * u / 75, "C");
  expect_close(ends[1], u / 50 + 2 * u / 75 + u / 100, "B");
}

// Alpha does not hold the link in the flow model: the data drains at the shared rate, then
// arrives the route's alpha (0.5 + 0.25 us) later.
TEST(SimFlow, ArrivalAddsTheRoutesAlpha) {
  const Topology topo = star({link_of(100, 0.5), link_of(100, 0.5)}, link_of(100, 0.25));
  const std::uint64_t size = 1'000'000;
  const double drain_us = size / (100 * kBytesPerUsPerGBps);
  const SimResult one = Simulator(topo, transfers(3, 1, {{0, 2}}), flow_with_timeline()).run(size);
  expect_close(one.time_us, drain_us + 0.75, "one flow");
  const SimResult two =
      Simulator(topo, transfers(3, 1, {{0, 2}, {1, 2}}), flow_with_timeline()).run(size);
  for (double end : ends_by_sender(two, 2)) expect_close(end, 2 * drain_us + 0.75, "two flows");
}

// At 1 GiB the ring All-Reduce on a100x4 runs for 0.1 s of simulated time: there, a flow's last
// micro-bytes drain in less than the clock can tell apart from now. They count as drained
// (before, the run looped for ever at that instant).
TEST(SimFlow, AFlowWhoseLastBytesDrainWithinTheClocksResolutionArrives) {
  const Topology topo = builtin("a100x4");
  const Schedule schedule = compile("ring over all", topo, Collective::all_reduce);
  const SimResult result = Simulator(topo, schedule, with_model(Model::flow)).run(1u << 30);
  EXPECT_TRUE(std::isfinite(result.time_us));
  EXPECT_GT(result.time_us, 0);
}

// The alpha-beta model on the same two transfers: FIFO on the shared link, so one finishes after
// S/B and the other waits for it and finishes at twice that.
TEST(SimAlphaBeta, TwoTransfersOnOneLinkAreSerialised) {
  const Topology topo = star({link_of(100), link_of(100)}, link_of(100));
  const std::uint64_t size = 1'000'000;
  const double alone_us = size / (100 * kBytesPerUsPerGBps);
  SimOptions options = bare(Model::alpha_beta);
  options.record_timeline = true;
  const SimResult result = Simulator(topo, transfers(3, 1, {{0, 2}, {1, 2}}), options).run(size);
  auto ends = ends_by_sender(result, 2);
  std::sort(ends.begin(), ends.end());
  expect_close(ends[0], alone_us, "first");
  expect_close(ends[1], 2 * alone_us, "second");
  expect_close(result.time_us, 2 * alone_us, "collective");
}

// Direct exchange through one NVSwitch: each GPU's link to the switch carries its 7 sends and
// the switch's link to it its 7 receives. Ready together, the sends start in rotated peer
// order (the k-th to rank r + k), so the FIFO links never queue two sends for one receiver and
// alpha-beta agrees with the flow model's fair sharing: L + l + 7 (S/8) / B.
TEST(SimAlphaBeta, DirectExchangeOnNvswitchAgreesWithTheFlowModel) {
  const Topology topo = builtin("a100x1");
  const Schedule schedule = compile("direct over all", topo);
  const double nvswitch_GBps = topo.link(0).bw_GBps;
  for (std::uint64_t size : {std::uint64_t{1} << 20, std::uint64_t{1} << 30}) {
    const double alpha_beta =
        Simulator(topo, schedule, with_model(Model::alpha_beta)).run(size).time_us;
    const double flow = Simulator(topo, schedule, with_model(Model::flow)).run(size).time_us;
    expect_close(alpha_beta, flow, "at " + std::to_string(size));
    expect_close(alpha_beta,
                 kLaunchUs + kStepUs +
                     7 * (static_cast<double>(size) / 8) / (nvswitch_GBps * kBytesPerUsPerGBps),
                 "the formula at " + std::to_string(size));
  }
}

// --- Connections: FIFOs with a bounded number of steps in flight. ---

// Rank 0 sends ten one-chunk messages to rank 1 on one connection; rank 1 takes the first only
// after a ten-chunk message from rank 2 has arrived (at 1 + 400 us on fullmesh3's 25 GB/s
// links, chunks of 1 MB). The sends queue on link 0 -> 1, the k-th starting at 40k us, except
// that with 8 slots the ninth must wait for a slot: until the first receive completes.
double ninth_send_starts_us(int slots) {
  const Topology topo = builtin("fullmesh3");
  Schedule schedule = empty_schedule("slots", Collective::all_gather, 3, 20);
  std::vector<Step> sends, receives;
  for (int k = 0; k < 10; ++k) {
    sends.push_back(make_step(StepKind::send, k, 1));
    receives.push_back(make_step(StepKind::recv, k, 1,
                                 k == 0 ? std::vector<StepRef>{{0, 0}} : std::vector<StepRef>{}));
  }
  schedule.programs[0].tbs.push_back(block(1, -1, 0, sends));
  schedule.programs[1].tbs.push_back(block(-1, 2, 0, {make_step(StepKind::recv, 10, 10)}));
  schedule.programs[1].tbs.push_back(block(-1, 0, 0, receives));
  schedule.programs[2].tbs.push_back(block(1, -1, 0, {make_step(StepKind::send, 10, 10)}));
  SimOptions options = bare(Model::alpha_beta);
  options.slots = slots;
  options.record_timeline = true;
  const SimResult result = Simulator(topo, schedule, options).run(20'000'000);
  for (const auto& t : result.timeline)
    if (t.rank == 0 && t.step == 8) return t.start_us;
  ADD_FAILURE() << "no ninth send";
  return -1;
}

// Rank 0 sends nine messages before it receives; rank 1 receives only after its own nine
// sends: with unbounded FIFOs that runs, with 8 slots both wait for a slot forever, and the
// error says so.
TEST(SimConnections, MoreInFlightThanSlotsStallsWithAClearError) {
  const Topology topo = builtin("fullmesh2");
  Schedule schedule = empty_schedule("too-deep", Collective::all_gather, 2, 2);
  for (int r = 0; r < 2; ++r) {
    std::vector<Step> steps;
    for (int k = 0; k < 9; ++k) steps.push_back(make_step(StepKind::send, r, 1));
    for (int k = 0; k < 9; ++k) steps.push_back(make_step(StepKind::recv, 1 - r, 1));
    schedule.programs[static_cast<std::size_t>(r)].tbs.push_back(block(1 - r, 1 - r, 0, steps));
  }
  SimOptions options = bare(Model::alpha_beta);
  options.slots = 9;
  EXPECT_NO_THROW(Simulator(topo, schedule, options).run(1024));
  options.slots = 8;
  try {
    Simulator(topo, schedule, options).run(1024);
    ADD_FAILURE() << "no stall";
  } catch (const support::InputError& e) {
    EXPECT_NE(std::string(e.what()).find("waits for a slot"), std::string::npos) << e.what();
  }
}

TEST(SimConnections, ASendWaitsForAFreeSlot) {
  expect_close(ninth_send_starts_us(8), 1 + 400, "8 slots");
  expect_close(ninth_send_starts_us(16), 8 * 40, "16 slots");
}

// --- Files, sweeps, batches, records. ---

// datasets/schedules/ring8-allgather.xml: `ring over all` compiled for ring8 and exported with
// write_msccl_xml, its route attributes removed so the simulator routes every transfer itself.
TEST(SimMscclXml, RingFileSimulatesToTheRingFormula) {
  const Schedule schedule = schedule::read_msccl_xml_file(
      std::string(OPTIFLOW_SOURCE_DIR) + "/datasets/schedules/ring8-allgather.xml");
  for (const auto& program : schedule.programs)
    for (const auto& tb : program.tbs)
      for (const auto& step : tb.steps) ASSERT_TRUE(step.route.empty());
  const Topology topo = builtin("ring8");
  for (Model model : {Model::alpha_beta, Model::flow}) {
    const Simulator sim(topo, schedule, with_model(model));
    for (std::uint64_t size : kSizes)
      expect_close(sim.run(size).time_us,
                   kLaunchUs + 7 * (kHopUs + (static_cast<double>(size) / 8) / kBwBytesPerUs),
                   "ring8 XML at " + std::to_string(size));
  }
}

TEST(SimSweep, SweepEqualsRunAtEverySizeAndRepeats) {
  const Topology topo = builtin("a100x2");
  const Schedule schedule = compile("rd over rails\ndirect over hosts", topo);
  const auto sizes = support::parse_sizes(support::kDefaultSizes);
  ASSERT_EQ(sizes.size(), 21u);
  for (Model model : {Model::alpha_beta, Model::flow}) {
    SimOptions options = with_model(model);
    options.record_timeline = true;
    const Simulator sim(topo, schedule, options);
    const auto swept = sim.sweep(sizes);
    const auto again = Simulator(topo, schedule, options).sweep(sizes);
    ASSERT_EQ(swept.size(), sizes.size());
    for (std::size_t i = 0; i < sizes.size(); ++i) {
      EXPECT_EQ(swept[i].size_bytes, sizes[i]);
      EXPECT_EQ(fingerprint(swept[i]), fingerprint(sim.run(sizes[i])))
          << to_string(model) << " at " << sizes[i];
      EXPECT_EQ(fingerprint(swept[i]), fingerprint(again[i]))
          << to_string(model) << " at " << sizes[i];
    }
  }
}

TEST(SimBatch, ParallelEqualsSerial) {
  const Topology topo = builtin("a100x2");
  const std::vector<std::string> programs{
      "ring over all",
      "ring over all reverse",
      "chain over all",
      "direct over all",
      "rd over all",
      "bruck over all",
      "binomial over all",
      "binary over all",
      "kary 3 over all",
      "dbtree over all",
      "bfs over all",
      "bfs over all reverse",
      "rd over rails\ndirect over hosts",
      "ring over hosts\nring over rails",
      "pipeline 4\nring over all",
      "channels 2\nring over all",
      "split nlocal as r {\n  ring over all by (host, (local - r) % nlocal)\n}",
      "direct over rails\nring over hosts",
      "pipeline 2\nbinary over all"};
  std::vector<Schedule> schedules;
  for (const auto& program : programs) schedules.push_back(compile(program, topo));
  schedules.push_back(compile("ring over all", topo, Collective::reduce_scatter));
  schedules.push_back(compile("rd over rails\ndirect over hosts", topo, Collective::all_reduce));
  std::vector<Candidate> candidates;
  for (const auto& schedule : schedules)
    candidates.push_back(
        Candidate{&schedule, {4096, std::uint64_t{1} << 20, std::uint64_t{1} << 28}});
  for (Model model : {Model::alpha_beta, Model::flow}) {
    SimOptions options = with_model(model);
    options.record_timeline = true;
    const auto parallel = simulate_all(topo, candidates, options, 4);
    ASSERT_EQ(parallel.size(), candidates.size());
    for (std::size_t c = 0; c < candidates.size(); ++c) {
      const auto serial =
          Simulator(topo, *candidates[c].schedule, options).sweep(candidates[c].sizes);
      ASSERT_EQ(parallel[c].size(), serial.size());
      for (std::size_t i = 0; i < serial.size(); ++i)
        EXPECT_EQ(fingerprint(parallel[c][i]), fingerprint(serial[i]))
            << to_string(model) << " candidate " << c;
    }
  }
}

// The ring's critical path: the event loop ends it at the first step (lowest index) to finish
// last, a final receive, and follows each step's latest prerequisite back: send, receive,
// send, ..., one send and one receive per hop, 2(N-1) steps,
// each starting exactly when the previous one ended, the first at the launch cost.
TEST(SimTimeline, RingCriticalPathTimelineAndLinkUsage) {
  for (int n : {2, 3, 8, 12}) {
    const Topology topo = builtin("ring" + std::to_string(n));
    const Schedule schedule = compile("ring over all", topo);
    for (Model model : {Model::alpha_beta, Model::flow}) {
      SimOptions options = with_model(model);
      options.record_timeline = true;
      const std::uint64_t size = std::uint64_t{1} << 24;
      const SimResult result = Simulator(topo, schedule, options).run(size);
      const double hop_us = kHopUs + (static_cast<double>(size) / n) / kBwBytesPerUs;

      const auto& path = result.critical_path;
      ASSERT_EQ(path.size(), static_cast<std::size_t>(2 * (n - 1))) << "ring" << n;
      EXPECT_EQ(path.front().start_us, kLaunchUs);
      EXPECT_EQ(path.back().end_us, result.time_us);
      for (std::size_t i = 0; i < path.size(); ++i) {
        EXPECT_EQ(path[i].kind, i % 2 == 0 ? StepKind::send : StepKind::recv) << i;
        EXPECT_LE(path[i].start_us, path[i].end_us);
        if (i > 0) {
          EXPECT_GE(path[i].start_us, path[i - 1].end_us) << i;
        }
      }

      ASSERT_EQ(result.timeline.size(), sends_in(schedule));
      double sent_bytes = 0, carried_bytes = 0;
      for (std::size_t i = 0; i < result.timeline.size(); ++i) {
        const auto& t = result.timeline[i];
        EXPECT_EQ(t.peer, (t.rank + 1) % n);
        ASSERT_EQ(t.route.size(), 1u);
        expect_close(t.end_us - t.start_us, hop_us, "one hop");
        expect_close(t.bytes, static_cast<double>(size) / n, "a chunk");
        if (i > 0) {
          EXPECT_LE(result.timeline[i - 1].start_us, t.start_us);
        }
        sent_bytes += t.bytes;
        carried_bytes += t.bytes * static_cast<double>(t.route.size());
      }
      expect_close(sent_bytes, (n - 1) * static_cast<double>(size), "bytes sent");

      ASSERT_EQ(result.links.size(), static_cast<std::size_t>(n)) << "one forward link per rank";
      double link_bytes = 0;
      // A link is busy at least while its bytes cross it, exactly that in the flow model.
      const double serialise_us = (n - 1) * (static_cast<double>(size) / n) / kBwBytesPerUs;
      for (const auto& l : result.links) {
        link_bytes += l.bytes;
        if (model == Model::flow) {
          expect_close(l.busy_us, serialise_us, "busy");
        } else {
          EXPECT_GE(l.busy_us, serialise_us * (1 - 1e-9));
          EXPECT_LE(l.busy_us, (n - 1) * hop_us * (1 + 1e-9));
        }
        expect_close(l.utilisation, l.bytes / (kBwBytesPerUs * result.time_us), "utilisation");
      }
      expect_close(link_bytes, carried_bytes, "link bytes");
    }
  }
}

// On a multi-hop fabric, link usage counts every link a transfer crosses.
TEST(SimTimeline, LinkBytesCountEveryHop) {
  const Topology topo = builtin("a100x2");
  const Schedule schedule = compile("ring over all", topo);
  SimOptions options;
  options.record_timeline = true;
  const SimResult result = Simulator(topo, schedule, options).run(std::uint64_t{1} << 26);
  ASSERT_EQ(result.timeline.size(), sends_in(schedule));
  double carried = 0;
  for (const auto& t : result.timeline) carried += t.bytes * static_cast<double>(t.route.size());
  const double link_bytes =
      std::accumulate(result.links.begin(), result.links.end(), 0.0,
                      [](double sum, const LinkUsage& l) { return sum + l.bytes; });
  expect_close(link_bytes, carried, "link bytes");
  EXPECT_GT(carried,
            15 * static_cast<double>(std::uint64_t{1} << 26));  // some routes have several hops
}

}  // namespace
}  // namespace optiflow::sim
