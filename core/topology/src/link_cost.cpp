#include "optiflow/topology/link_cost.hpp"

#include <algorithm>

#include "optiflow/support/units.hpp"

namespace optiflow::topology {

RouteCost route_cost(const Topology& topology, std::span<const LinkId> route) {
  RouteCost cost;
  for (LinkId l : route) {
    cost.alpha_us += topology.link(l).alpha_us;
    cost.bottleneck_GBps = std::min(cost.bottleneck_GBps, topology.link(l).bw_GBps);
  }
  cost.hop = hop_class(topology, route);
  return cost;
}

TransferCost transfer_cost(const RouteCost& route, const ProtocolCosts& protocol) {
  const double share = protocol.share(route.hop);
  return {route.alpha_us + protocol.step_latency(route.hop), route.bottleneck_GBps * share,
          1.0 / share};
}

TransferCost in_band(const TransferCost& cost, const MessageBand& band) {
  return {cost.latency_us + band.alpha_us, cost.rate_GBps * band.bw_factor,
          cost.wire_per_byte / band.bw_factor};
}

FifoLinks::FifoLinks(const Topology& topology)
    : busy_us_(topology.link_count(), 0), bytes_(topology.link_count(), 0) {
  servers_.reserve(topology.link_count());
  for (LinkId l = 0; l < topology.link_count(); ++l)
    servers_.push_back(Server{topology.link(l).bw_GBps});
}

double FifoLinks::Server::serialise_us(double wire) {
  if (wire != memo_wire) {
    memo_wire = wire;
    memo_us = support::transfer_us(wire, bw_GBps);
  }
  return memo_us;
}

FifoLinks::Booking FifoLinks::book(std::span<const LinkId> route, const TransferCost& cost,
                                   double bytes, double ready_us) {
  const double wire = bytes * cost.wire_per_byte;
  double reached = ready_us;  // when the data starts on the current link
  double first = ready_us;
  for (std::size_t i = 0; i < route.size(); ++i) {
    const LinkId l = route[i];
    Server& server = servers_[l];
    reached = std::max(reached, server.free_at);
    if (i == 0) first = reached;
    const double serialise = server.serialise_us(wire);
    server.free_at = reached + serialise;
    busy_us_[l] += serialise;
    bytes_[l] += wire;
  }
  return {first, reached + cost.latency_us + support::transfer_us(bytes, cost.rate_GBps)};
}

}  // namespace optiflow::topology
