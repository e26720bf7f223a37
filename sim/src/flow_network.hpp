// Flow level: the transfers on a link share its bandwidth max-min fairly (progressive
// filling), recomputed whenever a transfer starts or finishes; a transfer moves its wire bytes
// (data / the protocol's share) and arrives its latency after its last byte has left.
#pragma once

#include <span>

#include "event_queue.hpp"
#include "network.hpp"
#include "step_graph.hpp"

namespace optiflow::sim {

class FlowNetwork {
 public:
  FlowNetwork(const topology::Topology& topology, const StepGraph& graph);

  void launch(std::int32_t id, double size, const topology::TransferCost& cost, double now);
  double next_arrival();
  void take_arrivals(double now, std::vector<std::int32_t>& arrived);

  const std::vector<double>& link_busy_us() const { return busy_us_; }
  const std::vector<double>& link_bytes() const { return bytes_; }

  std::vector<double> started_us;

 private:
  struct Flow {
    std::int32_t id;
    double remaining;  // wire bytes
    double rate;       // wire bytes per microsecond
    double latency_us;
    std::span<const topology::LinkId> links;  // its route
  };

  void advance(double now);
  void share_bandwidth();
  double lowest_level();

  std::vector<double> left_, level_;  // per loaded link: capacity left, its even split
  std::vector<std::int32_t> unfixed_, slot_;
  std::vector<std::size_t> open_;  // links with unfixed flows, by their index in loaded_
  std::vector<char> fixed_;

  const StepGraph& graph_;
  std::vector<double> capacity_;  // bytes per microsecond
  std::vector<double> busy_us_, bytes_;
  std::vector<double> loaded_since_;  // per link: when it last went from no flow to one
  std::vector<std::vector<std::int32_t>> on_link_;  // per link: its active flows, by launch
  std::vector<topology::LinkId> loaded_;            // links with at least one active flow
  std::vector<Flow> active_;                        // in launch order
  std::vector<std::int32_t> index_of_;              // per transfer: its place in active_
  EventQueue<std::int32_t> latency_;  // drained transfers, arriving after their latency
  double now_ = 0;
  double next_drain_ = kNever;  // when the first active flow drains, at the current rates
  bool dirty_ = false;
};

static_assert(Network<FlowNetwork>);

}  // namespace optiflow::sim
