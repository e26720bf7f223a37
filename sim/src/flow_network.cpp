#include "flow_network.hpp"

#include <algorithm>
#include <limits>

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
      graph_(graph),
      capacity_(topology.link_count()),
      busy_us_(topology.link_count(), 0),
      bytes_(topology.link_count(), 0),
      loaded_since_(topology.link_count(), 0),
      on_link_(topology.link_count()),
      index_of_(graph.transfers.size(), -1) {
  for (topology::LinkId l = 0; l < topology.link_count(); ++l)
    capacity_[l] = support::bytes_per_us(topology.link(l).bw_GBps);
}

void FlowNetwork::launch(std::int32_t id, double size, const topology::TransferCost& cost,
                         double now) {
  advance(now);
  started_us[static_cast<std::size_t>(id)] = now;
  const double wire = size * cost.wire_per_byte;
  index_of_[static_cast<std::size_t>(id)] = static_cast<std::int32_t>(active_.size());
  active_.push_back(Flow{id, wire, 0, cost.latency_us, graph_.route(graph_.transfer(id))});
  for (topology::LinkId l : active_.back().links) {
    if (on_link_[l].empty()) {
      loaded_.push_back(l);
      loaded_since_[l] = now;
    }
    on_link_[l].push_back(id);
    bytes_[l] += wire;
  }
  dirty_ = true;
}

double FlowNetwork::next_arrival() {
  if (dirty_) {
    share_bandwidth();
    dirty_ = false;
  } else {
    next_drain_ = kNever;
    for (const Flow& f : active_) next_drain_ = std::min(next_drain_, now_ + f.remaining / f.rate);
  }
  return std::min(latency_.next_time(), next_drain_);
}

void FlowNetwork::take_arrivals(double now, std::vector<std::int32_t>& arrived) {
  advance(now);
  const double resolution_us = now_ * kClockResolution;
  auto drained = [resolution_us](const Flow& f) {
    return !(f.remaining > std::max(kDrainedBytes, f.rate * resolution_us));
  };
  // Drained flows leave (in launch order); the others keep their order.
  std::size_t kept = 0;
  while (kept < active_.size() && !drained(active_[kept])) ++kept;
  for (std::size_t i = kept; i < active_.size(); ++i) {
    const Flow& f = active_[i];
    if (!drained(f)) {
      index_of_[static_cast<std::size_t>(f.id)] = static_cast<std::int32_t>(kept);
      active_[kept++] = f;
      continue;
    }
    for (topology::LinkId l : f.links) {
      std::vector<std::int32_t>& on = on_link_[l];
      on.erase(std::find(on.begin(), on.end(), f.id));
      if (on.empty()) busy_us_[l] += now - loaded_since_[l];
    }
    latency_.push(now + f.latency_us, f.id);
  }
  if (kept < active_.size()) {
    active_.resize(kept);
    std::erase_if(loaded_, [&](topology::LinkId l) { return on_link_[l].empty(); });
    dirty_ = true;
  }
  while (latency_.next_time() <= now) arrived.push_back(latency_.pop());
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
// smallest fixes all its unfixed flows at that share, in one round. Links whose flows are all
// fixed leave the round's scans (`open_`, kept in load order).
void FlowNetwork::share_bandwidth() {
  const std::size_t loaded = loaded_.size();
  left_.resize(loaded);
  unfixed_.resize(loaded);
  slot_.resize(capacity_.size(), -1);
  for (std::size_t i = 0; i < loaded; ++i) {
    slot_[loaded_[i]] = static_cast<std::int32_t>(i);
    left_[i] = capacity_[loaded_[i]];
    unfixed_[i] = static_cast<std::int32_t>(on_link_[loaded_[i]].size());
  }
  fixed_.assign(active_.size(), 0);
  open_.resize(loaded);
  for (std::size_t i = 0; i < loaded; ++i) open_[i] = i;
  level_.resize(loaded);
  next_drain_ = kNever;
  double share = lowest_level();
  for (std::size_t remaining = active_.size(); remaining > 0;) {
    for (std::size_t i : open_) {
      if (unfixed_[i] == 0 || level_[i] > share) continue;
      for (std::int32_t id : on_link_[loaded_[i]]) {
        const auto f = static_cast<std::size_t>(index_of_[static_cast<std::size_t>(id)]);
        if (fixed_[f]) continue;
        fixed_[f] = 1;
        --remaining;
        active_[f].rate = share;
        next_drain_ = std::min(next_drain_, now_ + active_[f].remaining / share);
        for (topology::LinkId l : active_[f].links) {
          left_[static_cast<std::size_t>(slot_[l])] -= share;
          --unfixed_[static_cast<std::size_t>(slot_[l])];
        }
      }
    }
    std::erase_if(open_, [&](std::size_t i) { return unfixed_[i] == 0; });
    share = lowest_level();
  }
}

}  // namespace optiflow::sim
