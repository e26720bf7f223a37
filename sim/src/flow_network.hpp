// Flow level: the connections on a link share its bandwidth max-min fairly (progressive
// filling), recomputed whenever a transfer starts or finishes; a transfer moves its wire bytes
// (data / the protocol's share) and arrives its latency after its last byte has left.
//
// A connection is one flow: its messages in flight drain one after the other, in order, as one
// thread block (or one queue pair) moves them; a connection with eight messages posted gets no
// more of a link than one with one. Flows on one route get one rate (max-min fairness treats
// them alike), so the filling works on routes, each weighted by its number of flows: two
// channels between the same GPUs cost it one entry per link, not one per channel. It fills only one link of each set
// of links that the same routes cross (the slowest): the others always have at least as much
// left per flow, so they never limit anyone. And routes that share none of these links cannot
// change each other's rates: the routes fall into components, and a change refills only its
// own. Through NVSwitch a route crosses two links that few other routes share.
#pragma once

#include <cstdint>
#include <span>

#include "event_queue.hpp"
#include "network.hpp"
#include "step_graph.hpp"

namespace optiflow::sim {

/// Ranges of one array, one per route or component.
template <class T>
struct Ranges {
  std::vector<std::int32_t> begin{0};
  std::vector<T> items;
  std::span<const T> operator[](std::int32_t i) const {
    const auto b = static_cast<std::size_t>(begin[static_cast<std::size_t>(i)]);
    return std::span<const T>(items).subspan(
        b, static_cast<std::size_t>(begin[static_cast<std::size_t>(i) + 1]) - b);
  }
  void close() { begin.push_back(static_cast<std::int32_t>(items.size())); }
};

/// What the filling needs to know of a schedule's routes, independent of size: found once per
/// simulator, not per run.
struct FlowRoutes {
  FlowRoutes(const topology::Topology& topology, const StepGraph& graph);

  Ranges<topology::LinkId> constraints;    ///< per route: the links that may limit it
  std::vector<std::int32_t> component_of;  ///< per route
  Ranges<std::int32_t> component_routes;
  Ranges<topology::LinkId> component_links;  ///< their constraint links

  std::size_t components() const { return component_routes.begin.size() - 1; }

 private:
  void find_constraints(const topology::Topology& topology, const StepGraph& graph);
  void find_components(const topology::Topology& topology, std::int32_t routes);
};

class FlowNetwork {
 public:
  FlowNetwork(const topology::Topology& topology, const StepGraph& graph, const FlowRoutes& routes);

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
  void advance(double now);
  void start(const Flow& flow, double now);
  void start_next(std::int32_t connection, double now);
  void touch(std::int32_t route);
  void leave(std::int32_t route, double now);
  void share_bandwidth(std::int32_t component);
  double lowest_level();

  // Scratch of share_bandwidth, per loaded link of the component: capacity left, even split.
  std::vector<topology::LinkId> loaded_;
  std::vector<double> left_, level_;
  std::vector<std::int32_t> unfixed_, slot_;
  std::vector<std::size_t> open_;  // links with unfixed routes, by their index in loaded_
  std::vector<char> fixed_;        // per route

  const StepGraph& graph_;
  std::vector<double> capacity_;  // bytes per microsecond
  std::vector<double> busy_us_, bytes_;
  std::vector<double> loaded_since_;         // per link: when it last went from no flow to one
  std::vector<std::int32_t> flows_on_link_;  // per link: its active flows
  const FlowRoutes& routes_;
  std::vector<std::vector<std::int32_t>> routes_on_link_;  // per constraint link: active routes
  std::vector<std::int32_t> flows_on_route_;               // per route: its active flows
  std::vector<double> route_rate_;                         // per route: each flow's rate
  std::vector<std::int32_t> changed_;  // components whose flows changed since the last filling
  std::vector<char> is_changed_;       // per component
  std::vector<Flow> active_;           // in launch order
  std::vector<std::vector<Flow>> queued_;  // per connection: messages behind its active one
  std::vector<std::size_t> queue_head_;    // per connection: the next of queued_ to start
  std::vector<char> connection_busy_;      // per connection: a message of it is active
  std::vector<std::int32_t> drained_;      // scratch of take_arrivals
  EventQueue<std::int32_t> latency_;   // drained transfers, arriving after their latency
  double now_ = 0;
  double next_drain_ = kNever;  // when the first active flow drains, at the current rates
};

static_assert(Network<FlowNetwork>);

}  // namespace optiflow::sim
