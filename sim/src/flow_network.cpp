#include "flow_network.hpp"

#include <algorithm>
#include <limits>
#include <map>

#include "optiflow/support/units.hpp"

namespace optiflow::sim {
namespace {

// Bytes below this are rounding left-overs of a drained flow.
constexpr double kDrainedBytes = 1e-6;
// So are the bytes a flow moves in less than the clock can tell apart from now (a few units
// in the last place of the time): their drain time rounds to now, which would never pass.
constexpr double kClockResolution = 4 * std::numeric_limits<double>::epsilon();

}  // namespace

FlowNetwork::FlowNetwork(const topology::Topology& topology, const StepGraph& graph)
    : started_us(graph.transfers.size(), 0),
      fixed_(graph.routes.size(), 0),
      graph_(graph),
      capacity_(topology.link_count()),
      busy_us_(topology.link_count(), 0),
      bytes_(topology.link_count(), 0),
      loaded_since_(topology.link_count(), 0),
      flows_on_link_(topology.link_count(), 0),
      routes_on_link_(topology.link_count()),
      flows_on_route_(graph.routes.size(), 0),
      route_rate_(graph.routes.size(), 0) {
  for (topology::LinkId l = 0; l < topology.link_count(); ++l)
    capacity_[l] = support::bytes_per_us(topology.link(l).bw_GBps);
  find_constraints(topology);
}

// Links are grouped by the routes that cross them; each group is represented by its slowest
// link (the first among equals).
void FlowNetwork::find_constraints(const topology::Topology& topology) {
  const auto routes = static_cast<std::int32_t>(graph_.routes.size());
  std::vector<std::vector<std::int32_t>> crossing(topology.link_count());
  for (std::int32_t r = 0; r < routes; ++r)
    for (topology::LinkId l : graph_.links(r))
      if (crossing[l].empty() || crossing[l].back() != r) crossing[l].push_back(r);
  std::map<std::vector<std::int32_t>, topology::LinkId> slowest;
  for (topology::LinkId l = 0; l < topology.link_count(); ++l) {
    if (crossing[l].empty()) continue;
    const auto [it, inserted] = slowest.try_emplace(crossing[l], l);
    if (!inserted && capacity_[l] < capacity_[it->second]) it->second = l;
  }
  constraint_begin_.push_back(0);
  for (std::int32_t r = 0; r < routes; ++r) {
    const auto first = static_cast<std::ptrdiff_t>(constraint_begin_.back());
    for (topology::LinkId l : graph_.links(r)) {
      const topology::LinkId limit = slowest.at(crossing[l]);
      if (std::find(constraint_links_.begin() + first, constraint_links_.end(), limit) ==
          constraint_links_.end())
        constraint_links_.push_back(limit);
    }
    constraint_begin_.push_back(static_cast<std::int32_t>(constraint_links_.size()));
  }
}

std::span<const topology::LinkId> FlowNetwork::constraints(std::int32_t route) const {
  const auto r = static_cast<std::size_t>(route);
  return std::span<const topology::LinkId>(constraint_links_)
      .subspan(static_cast<std::size_t>(constraint_begin_[r]),
               static_cast<std::size_t>(constraint_begin_[r + 1] - constraint_begin_[r]));
}

void FlowNetwork::launch(std::int32_t id, double size, const topology::TransferCost& cost,
                         double now) {
  advance(now);
  started_us[static_cast<std::size_t>(id)] = now;
  const double wire = size * cost.wire_per_byte;
  const std::int32_t route = graph_.transfer(id).route;
  active_.push_back(Flow{id, route, wire, 0, cost.latency_us});
  const bool new_route = flows_on_route_[static_cast<std::size_t>(route)]++ == 0;
  for (topology::LinkId l : graph_.links(route)) {
    if (flows_on_link_[l]++ == 0) loaded_since_[l] = now;
    bytes_[l] += wire;
  }
  if (new_route) {
    active_routes_.push_back(route);
    for (topology::LinkId l : constraints(route)) {
      if (routes_on_link_[l].empty()) loaded_.push_back(l);
      routes_on_link_[l].push_back(route);
    }
  }
  dirty_ = true;
}

double FlowNetwork::next_arrival() {
  if (dirty_) {
    share_bandwidth();
    dirty_ = false;
  } else if (next_drain_ <= now_) {
    // The drain due now left a few bytes of rounding behind: when they drain, at these rates.
    next_drain_ = kNever;
    for (const Flow& f : active_) next_drain_ = std::min(next_drain_, now_ + f.remaining / f.rate);
  }
  return std::min(latency_.next_time(), next_drain_);
}

void FlowNetwork::take_arrivals(double now, std::vector<std::int32_t>& arrived) {
  const double dt = std::max(0.0, now - now_);
  now_ = std::max(now_, now);
  const double resolution_us = now_ * kClockResolution;
  // Each flow moves on to now; drained ones leave (in launch order), the others keep their order.
  std::size_t kept = 0;
  bool route_left = false;
  for (std::size_t i = 0; i < active_.size(); ++i) {
    Flow& f = active_[i];
    f.remaining -= f.rate * dt;
    if (f.remaining > std::max(kDrainedBytes, f.rate * resolution_us)) {
      if (kept < i) active_[kept] = f;
      ++kept;
      continue;
    }
    route_left |= leave(f.route, now);
    latency_.push(now + f.latency_us, f.id);
  }
  if (kept < active_.size()) {
    active_.resize(kept);
    if (route_left) {
      std::erase_if(loaded_, [&](topology::LinkId l) { return routes_on_link_[l].empty(); });
      std::erase_if(active_routes_, [&](std::int32_t r) {
        return flows_on_route_[static_cast<std::size_t>(r)] == 0;
      });
    }
    dirty_ = true;
  }
  while (latency_.next_time() <= now) arrived.push_back(latency_.pop());
}

// A flow on `route` has drained at `now`; true when it was the route's last.
bool FlowNetwork::leave(std::int32_t route, double now) {
  for (topology::LinkId l : graph_.links(route))
    if (--flows_on_link_[l] == 0) busy_us_[l] += now - loaded_since_[l];
  if (--flows_on_route_[static_cast<std::size_t>(route)] > 0) return false;
  for (topology::LinkId l : constraints(route)) {
    std::vector<std::int32_t>& on = routes_on_link_[l];
    on.erase(std::find(on.begin(), on.end(), route));
  }
  return true;
}

void FlowNetwork::advance(double now) {
  const double dt = now - now_;
  if (dt <= 0) return;
  for (Flow& f : active_) f.remaining -= f.rate * dt;
  now_ = now;
}

// Each open link's even split of what it has left among its unfixed flows; the smallest.
double FlowNetwork::lowest_level() {
  double lowest = kNever;
  for (std::size_t i : open_) {
    level_[i] = left_[i] / unfixed_[i];
    lowest = std::min(lowest, level_[i]);
  }
  return lowest;
}

// Progressive filling, by levels: every link whose even split of its remaining capacity is the
// smallest fixes all its unfixed routes at that share per flow, in one round. Links whose flows
// are all fixed leave the round's scans (`open_`, kept in load order).
void FlowNetwork::share_bandwidth() {
  const std::size_t loaded = loaded_.size();
  left_.resize(loaded);
  unfixed_.resize(loaded);
  slot_.resize(capacity_.size(), -1);
  for (std::size_t i = 0; i < loaded; ++i) {
    slot_[loaded_[i]] = static_cast<std::int32_t>(i);
    left_[i] = capacity_[loaded_[i]];
    unfixed_[i] = flows_on_link_[loaded_[i]];
  }
  for (std::int32_t r : active_routes_) fixed_[static_cast<std::size_t>(r)] = 0;
  open_.resize(loaded);
  for (std::size_t i = 0; i < loaded; ++i) open_[i] = i;
  level_.resize(loaded);
  double share = lowest_level();
  for (std::size_t remaining = active_routes_.size(); remaining > 0;) {
    for (std::size_t i : open_) {
      if (unfixed_[i] == 0 || level_[i] > share) continue;
      for (std::int32_t r : routes_on_link_[loaded_[i]]) {
        const auto route = static_cast<std::size_t>(r);
        if (fixed_[route]) continue;
        fixed_[route] = 1;
        --remaining;
        route_rate_[route] = share;
        const std::int32_t flows = flows_on_route_[route];
        const double taken = share * flows;
        for (topology::LinkId l : constraints(r)) {
          left_[static_cast<std::size_t>(slot_[l])] -= taken;
          unfixed_[static_cast<std::size_t>(slot_[l])] -= flows;
        }
      }
    }
    std::erase_if(open_, [&](std::size_t i) { return unfixed_[i] == 0; });
    share = lowest_level();
  }
  next_drain_ = kNever;
  for (Flow& f : active_) {
    f.rate = route_rate_[static_cast<std::size_t>(f.route)];
    next_drain_ = std::min(next_drain_, now_ + f.remaining / f.rate);
  }
}

}  // namespace optiflow::sim
