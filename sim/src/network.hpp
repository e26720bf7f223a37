// How transfers share links: the part of the simulator that differs between the two models.
#pragma once

#include <cstdint>
#include <memory>
#include <vector>

#include "event_queue.hpp"
#include "optiflow/sim/simulator.hpp"
#include "step_graph.hpp"

namespace optiflow::sim {

/// In-flight transfers. The event loop launches transfers and asks when the next one
/// arrives; everything is deterministic (ties in launch order).
class Network {
 public:
  virtual ~Network() = default;
  /// Transfer `id` of `bytes` of data, costing `cost`, is handed to its connection at `now`
  /// (never earlier than the last call).
  virtual void launch(std::int32_t id, double bytes, const topology::TransferCost& cost,
                      double now) = 0;
  /// When the next transfer arrives; kNever when none is in flight.
  virtual double next_arrival() = 0;
  /// Moves time to `now` and appends the transfers that have arrived by then, in order.
  virtual void take_arrivals(double now, std::vector<std::int32_t>& arrived) = 0;

  /// Per link: time with data on it, and bytes carried.
  virtual const std::vector<double>& link_busy_us() const = 0;
  virtual const std::vector<double>& link_bytes() const = 0;

  /// When each transfer's data started to move (after waiting for links).
  std::vector<double> started_us;
};

std::unique_ptr<Network> make_alpha_beta_network(const topology::Topology& topology,
                                                 const StepGraph& graph);
std::unique_ptr<Network> make_flow_network(const topology::Topology& topology,
                                           const StepGraph& graph);

}  // namespace optiflow::sim
