// The alpha-beta cost of moving bytes over links (DESIGN.md, "The cost model"), in one place
// for the compiler's scheduler and the simulator. n bytes over a route cost the sum of its
// links' alphas, plus the protocol's step latency for the route's class, plus n / the data
// rate: the slowest link's bandwidth times the protocol's data share. Each link is a FIFO server
// that serialises only its own bytes: data reaches link k no earlier than it started on link k-1,
// and keeps link k busy for (wire bytes / its bandwidth) from then, so a transfer never holds a
// link it is not using.
#pragma once

#include <limits>
#include <span>
#include <vector>

#include "optiflow/topology/protocol.hpp"
#include "optiflow/topology/topology.hpp"

namespace optiflow::topology {

struct RouteCost {
  double alpha_us = 0;
  double bottleneck_GBps = std::numeric_limits<double>::infinity();
  HopClass hop = HopClass::nvlink;
};
RouteCost route_cost(const Topology& topology, std::span<const LinkId> route);

/// A route under one protocol.
struct TransferCost {
  double latency_us = 0;  ///< from hand-off to the arrival of a step with no data
  double rate_GBps = std::numeric_limits<double>::infinity();  ///< data rate, links to itself
  double wire_per_byte = 1;  ///< bytes each link carries per data byte (1 / data share)
};
TransferCost transfer_cost(const RouteCost& route, const ProtocolCosts& protocol);
/// The same transfer as a message of a runtime's band: its alpha added, its rate scaled.
TransferCost in_band(const TransferCost& cost, const MessageBand& band);

/// Links as FIFO servers, with what each has carried.
class FifoLinks {
 public:
  explicit FifoLinks(const Topology& topology);

  struct Booking {
    double start_us = 0;    ///< when the data starts to move on its first link
    double arrival_us = 0;  ///< when its last byte has arrived
  };
  /// Books `bytes` of data, ready at `ready_us`, on `route` (whose cost is `cost`).
  Booking book(std::span<const LinkId> route, const TransferCost& cost, double bytes,
               double ready_us);

  /// Per link: time with data on it, and bytes carried (wire bytes, protocol overhead included).
  const std::vector<double>& busy_us() const { return busy_us_; }
  const std::vector<double>& bytes() const { return bytes_; }

 private:
  // What book() reads of a link, in one place. Most transfers of a schedule move equal amounts,
  // so the last serialisation time is kept: the same division, not repeated.
  struct Server {
    double bw_GBps = 0;
    double free_at = 0;
    double memo_wire = -1, memo_us = 0;
    double serialise_us(double wire);
  };
  std::vector<Server> servers_;
  std::vector<double> busy_us_, bytes_;
};

}  // namespace optiflow::topology
