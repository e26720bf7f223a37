// The alpha-beta link model shared by the compiler's scheduler and the simulator.
#include "optiflow/topology/link_cost.hpp"

#include <gtest/gtest.h>

#include <vector>

namespace optiflow::topology {
namespace {

// a -> b -> c with a fast first hop and a slow second one.
Topology two_hops() {
  Topology t("two-hops");
  const NodeId a = t.add_node({"a", NodeKind::gpu, 0, 0, 0});
  const NodeId b = t.add_node({"b", NodeKind::switch_, -1, -1, -1});
  const NodeId c = t.add_node({"c", NodeKind::gpu, 1, 1, 0});
  t.add_link(a, b, {LinkKind::nvlink, 100.0, 1.0});
  t.add_link(b, c, {LinkKind::ib, 10.0, 2.0});
  return t;
}

// The route's own cost, without a protocol's latency or data share.
TransferCost bare(const RouteCost& route) {
  return {route.alpha_us, route.bottleneck_GBps, 1.0};
}

TEST(LinkCost, RouteCostSumsAlphasAndTakesTheSlowestLink) {
  const Topology t = two_hops();
  const std::vector<LinkId> route{0, 1};
  const RouteCost cost = route_cost(t, route);
  EXPECT_DOUBLE_EQ(cost.alpha_us, 3.0);
  EXPECT_DOUBLE_EQ(cost.bottleneck_GBps, 10.0);
  EXPECT_EQ(cost.hop, HopClass::net);  // the second link is InfiniBand
}

TEST(LinkCost, AProtocolAddsItsStepLatencyAndScalesTheRate) {
  const Topology t = two_hops();
  const std::vector<LinkId> route{0, 1}, nvlink{0};
  const ProtocolCosts& ll = protocol_costs(Protocol::ll);
  const TransferCost over_net = transfer_cost(route_cost(t, route), ll);
  EXPECT_DOUBLE_EQ(over_net.latency_us, 3.0 + ll.step_latency(HopClass::net));
  EXPECT_DOUBLE_EQ(over_net.rate_GBps, 10.0 * ll.share(HopClass::net));
  EXPECT_DOUBLE_EQ(over_net.wire_per_byte, 1.0 / ll.share(HopClass::net));
  const TransferCost simple =
      transfer_cost(route_cost(t, nvlink), protocol_costs(Protocol::simple));
  EXPECT_DOUBLE_EQ(simple.latency_us,
                   1.0 + protocol_costs(Protocol::simple).step_latency(HopClass::nvlink));
  EXPECT_DOUBLE_EQ(simple.rate_GBps, 100.0);
}

TEST(LinkCost, OverMoreThanOneHostNoStepIsFasterThanTheNetworkOverhead) {
  const Topology two_hosts = two_hops();
  const ProtocolCosts ll = table_costs(two_hosts, Protocol::ll);
  EXPECT_DOUBLE_EQ(ll.step_latency(HopClass::nvlink), network_step_overhead_us(Protocol::ll));
  EXPECT_DOUBLE_EQ(ll.step_latency(HopClass::net),
                   protocol_costs(Protocol::ll).step_latency(HopClass::net));
  // Simple's NVLink step already costs more than its overhead.
  EXPECT_DOUBLE_EQ(table_costs(two_hosts, Protocol::simple).step_latency(HopClass::nvlink),
                   protocol_costs(Protocol::simple).step_latency(HopClass::nvlink));

  Topology one_host("one-host");
  const NodeId a = one_host.add_node({"a", NodeKind::gpu, 0, 0, 0});
  const NodeId b = one_host.add_node({"b", NodeKind::gpu, 1, 0, 1});
  one_host.add_link(a, b, {LinkKind::nvlink, 100.0, 1.0});
  EXPECT_DOUBLE_EQ(table_costs(one_host, Protocol::ll).step_latency(HopClass::nvlink),
                   protocol_costs(Protocol::ll).step_latency(HopClass::nvlink));
  EXPECT_LT(protocol_costs(Protocol::ll).step_latency(HopClass::nvlink),
            network_step_overhead_us(Protocol::ll));
}

TEST(LinkCost, DataReachesALaterLinkOnlyWhenThatLinkIsFree) {
  const Topology t = two_hops();
  FifoLinks links(t);
  const std::vector<LinkId> route{0, 1}, second_hop{1};
  // The slow link is busy until 10 us; the fast one is free.
  links.book(second_hop, bare(route_cost(t, second_hop)), 1e5, 0);
  const auto through = links.book(route, bare(route_cost(t, route)), 1e5, 0);
  EXPECT_DOUBLE_EQ(through.start_us, 0);  // it starts on the free first link at once
  EXPECT_DOUBLE_EQ(through.arrival_us, 10.0 + 3.0 + 10.0);
  EXPECT_DOUBLE_EQ(links.busy_us()[0], 1.0);
}

TEST(LinkCost, EachLinkIsBusyForItsOwnSerialisationOnly) {
  const Topology t = two_hops();
  FifoLinks links(t);
  const std::vector<LinkId> route{0, 1}, first_hop{0};
  // 1e5 bytes: 1 us on the 100 GB/s link, 10 us on the 10 GB/s one.
  const auto whole = links.book(route, bare(route_cost(t, route)), 1e5, 0);
  EXPECT_DOUBLE_EQ(whole.start_us, 0);
  EXPECT_DOUBLE_EQ(whole.arrival_us, 3.0 + 10.0);
  // The fast link is free after 1 us, although the transfer is still on the slow one.
  const auto next = links.book(first_hop, bare(route_cost(t, first_hop)), 1e5, 0);
  EXPECT_DOUBLE_EQ(next.start_us, 1.0);
  EXPECT_DOUBLE_EQ(next.arrival_us, 1.0 + 1.0 + 1.0);
  EXPECT_DOUBLE_EQ(links.busy_us()[0], 2.0);
  EXPECT_DOUBLE_EQ(links.busy_us()[1], 10.0);
  EXPECT_DOUBLE_EQ(links.bytes()[0], 2e5);
}

TEST(LinkCost, ALinkServesTransfersInTheOrderBooked) {
  const Topology t = two_hops();
  FifoLinks links(t);
  const std::vector<LinkId> slow{1};
  const TransferCost cost = bare(route_cost(t, slow));
  EXPECT_DOUBLE_EQ(links.book(slow, cost, 1e4, 0).arrival_us, 2.0 + 1.0);
  // Ready at 0.5 us but queued behind the first: starts when the link frees at 1 us.
  const auto second = links.book(slow, cost, 1e4, 0.5);
  EXPECT_DOUBLE_EQ(second.start_us, 1.0);
  EXPECT_DOUBLE_EQ(second.arrival_us, 1.0 + 2.0 + 1.0);
}

// FifoLinks keeps each link's last serialisation time: sizes that change back and forth must
// each be serialised at their own rate, exactly.
TEST(LinkCost, AlternatingSizesAreEachSerialisedAtTheirOwnRate) {
  const Topology t = two_hops();
  FifoLinks links(t);
  const std::vector<LinkId> slow{1};
  const TransferCost cost = bare(route_cost(t, slow));
  double free_at = 0, carried = 0;  // back to back: the link is busy until free_at
  for (const double bytes : {1e4, 1e4, 3e4, 1e4, 0.0, 3e4, 3e4}) {
    const double serialise = bytes / 1e4;  // 10 GB/s = 1e4 bytes per us
    const auto booking = links.book(slow, cost, bytes, 0);
    EXPECT_DOUBLE_EQ(booking.start_us, free_at) << bytes;
    EXPECT_DOUBLE_EQ(booking.arrival_us, free_at + 2.0 + serialise) << bytes;
    free_at += serialise;
    carried += bytes;
  }
  EXPECT_DOUBLE_EQ(links.busy_us()[1], free_at);
  EXPECT_DOUBLE_EQ(links.bytes()[1], carried);
}

}  // namespace
}  // namespace optiflow::topology
