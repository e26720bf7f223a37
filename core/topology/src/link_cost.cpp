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
  return cost;
}

FifoLinks::FifoLinks(const Topology& topology)
    : bw_GBps_(topology.link_count()),
      free_at_(topology.link_count(), 0),
      busy_us_(topology.link_count(), 0),
      bytes_(topology.link_count(), 0) {
  for (LinkId l = 0; l < topology.link_count(); ++l) bw_GBps_[l] = topology.link(l).bw_GBps;
}

FifoLinks::Booking FifoLinks::book(std::span<const LinkId> route, const RouteCost& cost,
                                   double bytes, double ready_us) {
  double start = ready_us;
  for (LinkId l : route) start = std::max(start, free_at_[l]);
  for (LinkId l : route) {
    const double serialise = support::transfer_us(bytes, bw_GBps_[l]);
    free_at_[l] = start + serialise;
    busy_us_[l] += serialise;
    bytes_[l] += bytes;
  }
  return {start, start + cost.alpha_us + support::transfer_us(bytes, cost.bottleneck_GBps)};
}

}  // namespace optiflow::topology
