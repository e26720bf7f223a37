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

FlowRoutes::FlowRoutes(const topology::Topology& topology, const StepGraph& graph) {
  find_constraints(topology, graph);
  find_components(topology, static_cast<std::int32_t>(graph.routes.size()));
}

// Links are grouped by the routes that cross them; each group is represented by its slowest
// link (the first among equals).
void FlowRoutes::find_constraints(const topology::Topology& topology, const StepGraph& graph) {
  const auto routes = static_cast<std::int32_t>(graph.routes.size());
  std::vector<std::vector<std::int32_t>> crossing(topology.link_count());
  for (std::int32_t r = 0; r < routes; ++r)
    for (topology::LinkId l : graph.links(r))
      if (crossing[l].empty() || crossing[l].back() != r) crossing[l].push_back(r);
  std::map<std::vector<std::int32_t>, topology::LinkId> slowest;
  for (topology::LinkId l = 0; l < topology.link_count(); ++l) {
    if (crossing[l].empty()) continue;
    const auto [it, inserted] = slowest.try_emplace(crossing[l], l);
    if (!inserted && topology.link(l).bw_GBps < topology.link(it->second).bw_GBps) it->second = l;
  }
  for (std::int32_t r = 0; r < routes; ++r) {
    std::vector<topology::LinkId>& items = constraints.items;
    const std::ptrdiff_t first = constraints.begin.back();
    for (topology::LinkId l : graph.links(r)) {
      const topology::LinkId limit = slowest.at(crossing[l]);
      if (std::find(items.begin() + first, items.end(), limit) == items.end())
        items.push_back(limit);
    }
    constraints.close();
  }
}

FlowNetwork::FlowNetwork(const topology::Topology& topology, const StepGraph& graph,
                         const FlowRoutes& routes)
    : started_us(graph.transfers.size(), 0),
      fixed_(graph.routes.size(), 0),
      graph_(graph),
      capacity_(topology.link_count()),
      busy_us_(topology.link_count(), 0),
      bytes_(topology.link_count(), 0),
      loaded_since_(topology.link_count(), 0),
      flows_on_link_(topology.link_count(), 0),
      routes_(routes),
      routes_on_link_(topology.link_count()),
      flows_on_route_(graph.routes.size(), 0),
      route_rate_(graph.routes.size(), 0),
      is_changed_(routes.components(), 0),
      queued_(static_cast<std::size_t>(graph.connections)),
      queue_head_(static_cast<std::size_t>(graph.connections), 0),
      connection_busy_(static_cast<std::size_t>(graph.connections), 0) {
  for (topology::LinkId l = 0; l < topology.link_count(); ++l)
    capacity_[l] = support::bytes_per_us(topology.link(l).bw_GBps);
}

// Routes are in one component when a chain of shared constraint links joins them (union-find).
void FlowRoutes::find_components(const topology::Topology& topology, std::int32_t routes) {
  std::vector<std::int32_t> parent(static_cast<std::size_t>(routes));
  for (std::int32_t r = 0; r < routes; ++r) parent[static_cast<std::size_t>(r)] = r;
  auto root = [&](std::int32_t r) {
    while (parent[static_cast<std::size_t>(r)] != r)
      r = parent[static_cast<std::size_t>(r)] =
          parent[static_cast<std::size_t>(parent[static_cast<std::size_t>(r)])];
    return r;
  };
  std::vector<std::int32_t> first_route(topology.link_count(), -1);
  for (std::int32_t r = 0; r < routes; ++r)
    for (topology::LinkId l : constraints[r]) {
      if (first_route[l] < 0)
        first_route[l] = r;
      else
        parent[static_cast<std::size_t>(root(r))] = root(first_route[l]);
    }
  // Components numbered by their first route; routes and links listed in route order.
  std::vector<std::int32_t> number(static_cast<std::size_t>(routes), -1);
  component_of.resize(static_cast<std::size_t>(routes));
  std::vector<std::vector<std::int32_t>> members;
  for (std::int32_t r = 0; r < routes; ++r) {
    std::int32_t& c = number[static_cast<std::size_t>(root(r))];
    if (c < 0) {
      c = static_cast<std::int32_t>(members.size());
      members.emplace_back();
    }
    component_of[static_cast<std::size_t>(r)] = c;
    members[static_cast<std::size_t>(c)].push_back(r);
  }
  for (const std::vector<std::int32_t>& routes_of : members) {
    for (std::int32_t r : routes_of) {
      component_routes.items.push_back(r);
      for (topology::LinkId l : constraints[r])
        if (first_route[l] == r) component_links.items.push_back(l);
    }
    component_routes.close();
    component_links.close();
  }
}

// The flows on `route` changed: its component's rates must be shared again.
void FlowNetwork::touch(std::int32_t route) {
  const auto c = static_cast<std::size_t>(routes_.component_of[static_cast<std::size_t>(route)]);
  if (is_changed_[c]) return;
  is_changed_[c] = 1;
  changed_.push_back(static_cast<std::int32_t>(c));
}

void FlowNetwork::launch(std::int32_t id, double size, const topology::TransferCost& cost,
                         double now) {
  advance(now);
  const SimTransfer& t = graph_.transfer(id);
  const Flow flow{id, t.route, size * cost.wire_per_byte, 0, cost.latency_us};
  const auto c = static_cast<std::size_t>(t.connection);
  if (connection_busy_[c]) {
    queued_[c].push_back(flow);
    return;
  }
  connection_busy_[c] = 1;
  start(flow, now);
}

void FlowNetwork::start(const Flow& flow, double now) {
  started_us[static_cast<std::size_t>(flow.id)] = now;
  active_.push_back(flow);
  for (topology::LinkId l : graph_.links(flow.route)) {
    if (flows_on_link_[l]++ == 0) loaded_since_[l] = now;
    bytes_[l] += flow.remaining;
  }
  if (flows_on_route_[static_cast<std::size_t>(flow.route)]++ == 0)
    for (topology::LinkId l : routes_.constraints[flow.route]) routes_on_link_[l].push_back(flow.route);
  touch(flow.route);
}

// The next drain time holds until flows change, or until it has come and left a few bytes of
// rounding behind.
double FlowNetwork::next_arrival() {
  if (changed_.empty() && next_drain_ > now_) return std::min(latency_.next_time(), next_drain_);
  for (std::int32_t c : changed_) {
    share_bandwidth(c);
    is_changed_[static_cast<std::size_t>(c)] = 0;
  }
  changed_.clear();
  next_drain_ = kNever;
  for (Flow& f : active_) {
    f.rate = route_rate_[static_cast<std::size_t>(f.route)];
    next_drain_ = std::min(next_drain_, now_ + f.remaining / f.rate);
  }
  return std::min(latency_.next_time(), next_drain_);
}

void FlowNetwork::take_arrivals(double now, std::vector<std::int32_t>& arrived) {
  const double dt = std::max(0.0, now - now_);
  now_ = std::max(now_, now);
  const double resolution_us = now_ * kClockResolution;
  // Each flow moves on to now; drained ones leave (in launch order), the others keep their
  // order, and each drained connection starts its next message.
  std::size_t kept = 0;
  const std::size_t moving = active_.size();
  for (std::size_t i = 0; i < moving; ++i) {
    Flow f = active_[i];
    f.remaining -= f.rate * dt;
    if (f.remaining > std::max(kDrainedBytes, f.rate * resolution_us)) {
      active_[kept++] = f;
      continue;
    }
    leave(f.route, now);
    latency_.push(now + f.latency_us, f.id);
    drained_.push_back(f.id);
  }
  active_.erase(active_.begin() + static_cast<std::ptrdiff_t>(kept),
                active_.begin() + static_cast<std::ptrdiff_t>(moving));
  for (std::int32_t id : drained_) start_next(graph_.transfer(id).connection, now);
  drained_.clear();
  while (latency_.next_time() <= now) arrived.push_back(latency_.pop());
}

void FlowNetwork::start_next(std::int32_t connection, double now) {
  const auto c = static_cast<std::size_t>(connection);
  std::vector<Flow>& queue = queued_[c];
  if (queue_head_[c] == queue.size()) {
    connection_busy_[c] = 0;
    queue.clear();
    queue_head_[c] = 0;
    return;
  }
  start(queue[queue_head_[c]++], now);
}

// A flow on `route` has drained at `now`.
void FlowNetwork::leave(std::int32_t route, double now) {
  for (topology::LinkId l : graph_.links(route))
    if (--flows_on_link_[l] == 0) busy_us_[l] += now - loaded_since_[l];
  touch(route);
  if (--flows_on_route_[static_cast<std::size_t>(route)] > 0) return;
  for (topology::LinkId l : routes_.constraints[route]) {
    std::vector<std::int32_t>& on = routes_on_link_[l];
    on.erase(std::find(on.begin(), on.end(), route));
  }
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

// Progressive filling of one component, by levels: every link whose even split of its remaining
// capacity is the smallest fixes all its unfixed routes at that share per flow, in one round.
// Links whose flows are all fixed leave the round's scans (`open_`, in the component's order).
void FlowNetwork::share_bandwidth(std::int32_t component) {
  loaded_.clear();
  for (topology::LinkId l : routes_.component_links[component])
    if (!routes_on_link_[l].empty()) loaded_.push_back(l);
  const std::size_t loaded = loaded_.size();
  left_.resize(loaded);
  unfixed_.resize(loaded);
  slot_.resize(capacity_.size(), -1);
  for (std::size_t i = 0; i < loaded; ++i) {
    slot_[loaded_[i]] = static_cast<std::int32_t>(i);
    left_[i] = capacity_[loaded_[i]];
    unfixed_[i] = flows_on_link_[loaded_[i]];
  }
  std::size_t remaining = 0;
  for (std::int32_t r : routes_.component_routes[component]) {
    const bool active = flows_on_route_[static_cast<std::size_t>(r)] > 0;
    fixed_[static_cast<std::size_t>(r)] = !active;
    remaining += active;
  }
  open_.resize(loaded);
  for (std::size_t i = 0; i < loaded; ++i) open_[i] = i;
  level_.resize(loaded);
  double share = lowest_level();
  while (remaining > 0) {
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
        for (topology::LinkId l : routes_.constraints[r]) {
          left_[static_cast<std::size_t>(slot_[l])] -= taken;
          unfixed_[static_cast<std::size_t>(slot_[l])] -= flows;
        }
      }
    }
    std::erase_if(open_, [&](std::size_t i) { return unfixed_[i] == 0; });
    share = lowest_level();
  }
}

}  // namespace optiflow::sim
