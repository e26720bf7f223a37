// The alpha-beta cost of moving bytes over links (DESIGN.md, "The cost model"), in one place
// for the compiler's scheduler and the simulator: n bytes over a route cost the sum of its
// links' alphas plus n / the slowest link's bandwidth, and each link is a FIFO server that is
// busy for its own serialisation time only (n / its bandwidth), so a fast link on a slow path
// is free again before the transfer arrives.
#pragma once

#include <limits>
#include <span>
#include <vector>

#include "optiflow/topology/topology.hpp"

namespace optiflow::topology {

struct RouteCost {
  double alpha_us = 0;
  double bottleneck_GBps = std::numeric_limits<double>::infinity();
};
RouteCost route_cost(const Topology& topology, std::span<const LinkId> route);

/// Links as FIFO servers, with what each has carried.
class FifoLinks {
 public:
  explicit FifoLinks(const Topology& topology);

  struct Booking {
    double start_us = 0;    ///< when the data starts to move (every link of the route is free)
    double arrival_us = 0;  ///< when its last byte has arrived
  };
  /// Books `bytes` ready at `ready_us` on `route` (whose cost is `cost`).
  Booking book(std::span<const LinkId> route, const RouteCost& cost, double bytes, double ready_us);

  /// Per link: time with data on it, and bytes carried.
  const std::vector<double>& busy_us() const { return busy_us_; }
  const std::vector<double>& bytes() const { return bytes_; }

 private:
  std::vector<double> bw_GBps_, free_at_, busy_us_, bytes_;
};

}  // namespace optiflow::topology
