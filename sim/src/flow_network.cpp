#include "flow_network.hpp"

#include <algorithm>

#include "optiflow/support/units.hpp"

namespace optiflow::sim {
namespace {

// Bytes below this are rounding left-overs of a drained flow.
constexpr double kDrainedBytes = 1e-6;

}  // namespace

FlowNetwork::FlowNetwork(const topology::Topology& topology, const StepGraph& graph)
    : started_us(graph.transfers.size(), 0),
      graph_(graph),
      capacity_(topology.link_count()),
      busy_us_(topology.link_count(), 0),
      bytes_(topology.link_count(), 0),
      flows_on_(topology.link_count()) {
  for (topology::LinkId l = 0; l < topology.link_count(); ++l)
    capacity_[l] = support::bytes_per_us(topology.link(l).bw_GBps);
}

void FlowNetwork::launch(std::int32_t id, double size, const topology::TransferCost& cost,
                         double now) {
  advance(now);
  started_us[static_cast<std::size_t>(id)] = now;
  const double wire = size * cost.wire_per_byte;
  active_.push_back(Flow{id, wire, 0, cost.latency_us, graph_.route(graph_.transfer(id))});
  for (topology::LinkId l : active_.back().links) {
    if (flows_on_[l]++ == 0) loaded_.push_back(l);
    bytes_[l] += wire;
  }
  dirty_ = true;
}

double FlowNetwork::next_arrival() {
  if (dirty_) {
    share_bandwidth();
    dirty_ = false;
  }
  double next = latency_.next_time();
  for (const Flow& f : active_) next = std::min(next, now_ + f.remaining / f.rate);
  return next;
}

void FlowNetwork::take_arrivals(double now, std::vector<std::int32_t>& arrived) {
  advance(now);
  const auto drained = std::stable_partition(
      active_.begin(), active_.end(), [](const Flow& f) { return f.remaining > kDrainedBytes; });
  if (drained != active_.end()) {
    for (auto it = drained; it != active_.end(); ++it) {
      for (topology::LinkId l : it->links)
        if (--flows_on_[l] == 0) std::erase(loaded_, l);
      latency_.push(now + it->latency_us, it->id);
    }
    active_.erase(drained, active_.end());
    dirty_ = true;
  }
  while (latency_.next_time() <= now) arrived.push_back(latency_.pop());
}

void FlowNetwork::advance(double now) {
  const double dt = now - now_;
  if (dt <= 0) return;
  for (Flow& f : active_) f.remaining -= f.rate * dt;
  for (topology::LinkId l : loaded_) busy_us_[l] += dt;
  now_ = now;
}

// Progressive filling, by levels: every link whose even split of its remaining capacity is the
// smallest fixes all its unfixed flows at that share, in one round. Links whose flows are all
// fixed leave the round's scans (`open_`, kept in load order).
void FlowNetwork::share_bandwidth() {
  const std::size_t loaded = loaded_.size();
  left_.resize(loaded);
  unfixed_.resize(loaded);
  member_begin_.assign(loaded + 1, 0);
  slot_.resize(capacity_.size(), -1);
  for (std::size_t i = 0; i < loaded; ++i) {
    slot_[loaded_[i]] = static_cast<std::int32_t>(i);
    left_[i] = capacity_[loaded_[i]];
    unfixed_[i] = flows_on_[loaded_[i]];
    member_begin_[i + 1] = member_begin_[i] + flows_on_[loaded_[i]];
  }
  members_.resize(static_cast<std::size_t>(member_begin_[loaded]));
  fill_.assign(member_begin_.begin(), member_begin_.end() - 1);
  for (std::size_t f = 0; f < active_.size(); ++f)
    for (topology::LinkId l : active_[f].links)
      members_[static_cast<std::size_t>(fill_[static_cast<std::size_t>(slot_[l])]++)] =
          static_cast<std::int32_t>(f);
  fixed_.assign(active_.size(), 0);
  open_.resize(loaded);
  for (std::size_t i = 0; i < loaded; ++i) open_[i] = i;
  level_.resize(loaded);
  for (std::size_t remaining = active_.size(); remaining > 0;) {
    double share = kNever;
    for (std::size_t i : open_) {
      level_[i] = left_[i] / unfixed_[i];
      share = std::min(share, level_[i]);
    }
    for (std::size_t i : open_) {
      if (unfixed_[i] == 0 || level_[i] > share) continue;
      for (std::int32_t m = member_begin_[i]; m < member_begin_[i + 1]; ++m) {
        const auto f = static_cast<std::size_t>(members_[static_cast<std::size_t>(m)]);
        if (fixed_[f]) continue;
        fixed_[f] = 1;
        --remaining;
        active_[f].rate = share;
        for (topology::LinkId l : active_[f].links) {
          left_[static_cast<std::size_t>(slot_[l])] -= share;
          --unfixed_[static_cast<std::size_t>(slot_[l])];
        }
      }
    }
    std::erase_if(open_, [&](std::size_t i) { return unfixed_[i] == 0; });
  }
}

}  // namespace optiflow::sim
