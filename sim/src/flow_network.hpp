// Flow level: the transfers on a link share its bandwidth max-min fairly (progressive
// filling), recomputed whenever a transfer starts or finishes; a transfer moves its wire bytes
// (data / the protocol's share) and arrives its latency after its last byte has left.
//
// Transfers on one route get one rate (max-min fairness treats them alike), so the filling
// works on routes, each weighted by its number of flows: a connection with several messages in
// flight costs it one entry per link, not one per message. And it fills only one link of each
// set of links that the same routes cross (the slowest): the others always have at least as
// much left per flow, so they never limit anyone. A route through NVSwitch crosses two links
// that no other route shares; most links of a ring are such.
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
    std::int32_t route;
    double remaining;  // wire bytes
    double rate;       // wire bytes per microsecond
    double latency_us;
  };

  void find_constraints(const topology::Topology& topology);
  std::span<const topology::LinkId> constraints(std::int32_t route) const;
  void advance(double now);
  bool leave(std::int32_t route, double now);
  void share_bandwidth();
  double lowest_level();

  std::vector<double> left_, level_;  // per loaded link: capacity left, its even split
  std::vector<std::int32_t> unfixed_, slot_;
  std::vector<std::size_t> open_;  // links with unfixed routes, by their index in loaded_
  std::vector<char> fixed_;        // per route

  const StepGraph& graph_;
  std::vector<double> capacity_;  // bytes per microsecond
  std::vector<double> busy_us_, bytes_;
  std::vector<double> loaded_since_;         // per link: when it last went from no flow to one
  std::vector<std::int32_t> flows_on_link_;  // per link: its active flows
  // Per route: the links that may limit it (constraints()), one per set of links crossed by the
  // same routes.
  std::vector<std::int32_t> constraint_begin_;
  std::vector<topology::LinkId> constraint_links_;
  std::vector<std::vector<std::int32_t>> routes_on_link_;  // per constraint link: active routes
  std::vector<topology::LinkId> loaded_;                   // constraint links with active routes
  std::vector<std::int32_t> flows_on_route_;               // per route: its active flows
  std::vector<double> route_rate_;                         // per route: each flow's rate
  std::vector<std::int32_t> active_routes_;  // routes with active flows, by first launch
  std::vector<Flow> active_;                 // in launch order
  EventQueue<std::int32_t> latency_;         // drained transfers, arriving after their latency
  double now_ = 0;
  double next_drain_ = kNever;  // when the first active flow drains, at the current rates
  bool dirty_ = false;          // flows started or left since the rates were last shared
};

static_assert(Network<FlowNetwork>);

}  // namespace optiflow::sim
