// Alpha-beta: every link is a FIFO server; a transfer waits until its whole route is free and
// then holds it for alpha (summed over the route) + bytes / bottleneck bandwidth.
#include <queue>
#include <tuple>

#include "network.hpp"

namespace optiflow::sim {
namespace {

class AlphaBetaNetwork final : public Network {
 public:
  AlphaBetaNetwork(const core::Topology& topology, const StepGraph& graph)
      : graph_(graph), free_at_(topology.link_count(), 0) {
    started_us.assign(graph.transfers.size(), 0);
    busy_us.assign(topology.link_count(), 0);
    bytes.assign(topology.link_count(), 0);
  }

  void launch(std::int32_t id, double size, double now) override {
    const SimTransfer& t = graph_.transfers[static_cast<std::size_t>(id)];
    double start = now;
    for (std::int32_t i = t.route_begin; i < t.route_end; ++i)
      start = std::max(start, free_at_[graph_.route_links[static_cast<std::size_t>(i)]]);
    const double hold = t.alpha_us + size / (t.bottleneck_GBps * 1e3);  // GB/s = 1e3 B/us
    for (std::int32_t i = t.route_begin; i < t.route_end; ++i) {
      const core::LinkId l = graph_.route_links[static_cast<std::size_t>(i)];
      free_at_[l] = start + hold;
      busy_us[l] += hold;
      bytes[l] += size;
    }
    started_us[static_cast<std::size_t>(id)] = start;
    arrivals_.push({start + hold, sequence_++, id});
  }

  double next_arrival() override { return arrivals_.empty() ? kNever : std::get<0>(arrivals_.top()); }

  void take_arrivals(double now, std::vector<std::int32_t>& arrived) override {
    while (!arrivals_.empty() && std::get<0>(arrivals_.top()) <= now) {
      arrived.push_back(std::get<2>(arrivals_.top()));
      arrivals_.pop();
    }
  }

 private:
  using Arrival = std::tuple<double, std::uint64_t, std::int32_t>;
  const StepGraph& graph_;
  std::vector<double> free_at_;
  std::priority_queue<Arrival, std::vector<Arrival>, std::greater<>> arrivals_;
  std::uint64_t sequence_ = 0;
};

}  // namespace

std::unique_ptr<Network> make_alpha_beta_network(const core::Topology& topology, const StepGraph& graph) {
  return std::make_unique<AlphaBetaNetwork>(topology, graph);
}

}  // namespace optiflow::sim
