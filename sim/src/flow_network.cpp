// Flow level: the transfers on a link share its bandwidth max-min fairly (progressive
// filling), recomputed whenever a transfer starts or finishes; a transfer moves its wire bytes
// (data / the protocol's share) and arrives its latency after its last byte has left.
#include <algorithm>

#include "network.hpp"
#include "optiflow/support/units.hpp"

namespace optiflow::sim {
namespace {

// Bytes below this are rounding left-overs of a drained flow.
constexpr double kDrainedBytes = 1e-6;

class FlowNetwork final : public Network {
 public:
  FlowNetwork(const topology::Topology& topology, const StepGraph& graph)
      : graph_(graph), capacity_(topology.link_count()), flows_on_(topology.link_count()) {
    for (topology::LinkId l = 0; l < topology.link_count(); ++l)
      capacity_[l] = support::bytes_per_us(topology.link(l).bw_GBps);
    started_us.assign(graph.transfers.size(), 0);
    busy_us_.assign(topology.link_count(), 0);
    bytes_.assign(topology.link_count(), 0);
  }

  void launch(std::int32_t id, double size, const topology::TransferCost& cost,
              double now) override {
    advance(now);
    started_us[static_cast<std::size_t>(id)] = now;
    const double wire = size * cost.wire_per_byte;
    active_.push_back(Flow{id, wire, 0, cost.latency_us, links_of(id)});
    for (topology::LinkId l : active_.back().links) {
      if (flows_on_[l]++ == 0) loaded_.push_back(l);
      bytes_[l] += wire;
    }
    dirty_ = true;
  }

  double next_arrival() override {
    if (dirty_) {
      share_bandwidth();
      dirty_ = false;
    }
    double next = latency_.next_time();
    for (const Flow& f : active_) next = std::min(next, now_ + f.remaining / f.rate);
    return next;
  }

  void take_arrivals(double now, std::vector<std::int32_t>& arrived) override {
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

  const std::vector<double>& link_busy_us() const override { return busy_us_; }
  const std::vector<double>& link_bytes() const override { return bytes_; }

 private:
  struct Flow {
    std::int32_t id;
    double remaining;  // wire bytes
    double rate;       // wire bytes per microsecond
    double latency_us;
    std::span<const topology::LinkId> links;  // its route
  };

  std::span<const topology::LinkId> links_of(std::int32_t id) const {
    return graph_.route(graph_.transfer(id));
  }

  void advance(double now) {
    const double dt = now - now_;
    if (dt <= 0) return;
    for (Flow& f : active_) f.remaining -= f.rate * dt;
    for (topology::LinkId l : loaded_) busy_us_[l] += dt;
    now_ = now;
  }

  // Progressive filling, by levels: every link whose even split of its remaining capacity is
  // the smallest fixes all its unfixed flows at that share, in one round. Links whose flows are
  // all fixed leave the round's scans (`open_`, kept in load order).
  void share_bandwidth() {
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

  std::vector<double> left_, level_;  // per loaded link: capacity left, its even split
  std::vector<std::int32_t> unfixed_, member_begin_, members_, fill_, slot_;
  std::vector<std::size_t> open_;  // links with unfixed flows, by their index in loaded_
  std::vector<char> fixed_;

  const StepGraph& graph_;
  std::vector<double> capacity_;  // bytes per microsecond
  std::vector<double> busy_us_, bytes_;
  std::vector<std::int32_t> flows_on_;    // active flows per link
  std::vector<topology::LinkId> loaded_;  // links with at least one active flow
  std::vector<Flow> active_;
  EventQueue<std::int32_t> latency_;  // drained transfers, arriving after their latency
  double now_ = 0;
  bool dirty_ = false;
};

}  // namespace

std::unique_ptr<Network> make_flow_network(const topology::Topology& topology,
                                           const StepGraph& graph) {
  return std::make_unique<FlowNetwork>(topology, graph);
}

}  // namespace optiflow::sim
