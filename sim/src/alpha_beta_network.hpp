// Alpha-beta: every link is a FIFO server (topology::FifoLinks, the model the compiler's
// scheduler uses too). A transfer keeps each link of its route busy for the time that link
// needs to serialise its bytes, from when the data reaches it, and arrives after the route's
// latency plus bytes / data rate.
#pragma once

#include "event_queue.hpp"
#include "network.hpp"
#include "step_graph.hpp"

namespace optiflow::sim {

class AlphaBetaNetwork {
 public:
  AlphaBetaNetwork(const topology::Topology& topology, const StepGraph& graph)
      : started_us(graph.transfers.size(), 0), graph_(graph), links_(topology) {}

  void launch(std::int32_t id, double size, const topology::TransferCost& cost, double now) {
    const auto booking = links_.book(graph_.route(graph_.transfer(id)), cost, size, now);
    started_us[static_cast<std::size_t>(id)] = booking.start_us;
    arrivals_.push(booking.arrival_us, id);
  }

  double next_arrival() const { return arrivals_.next_time(); }

  void take_arrivals(double now, std::vector<std::int32_t>& arrived) {
    while (arrivals_.next_time() <= now) arrived.push_back(arrivals_.pop());
  }

  const std::vector<double>& link_busy_us() const { return links_.busy_us(); }
  const std::vector<double>& link_bytes() const { return links_.bytes(); }

  std::vector<double> started_us;

 private:
  const StepGraph& graph_;
  topology::FifoLinks links_;
  EventQueue<std::int32_t> arrivals_;  // transfer ids
};

static_assert(Network<AlphaBetaNetwork>);

}  // namespace optiflow::sim
