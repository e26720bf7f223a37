// Alpha-beta: every link is a FIFO server. A transfer waits until every link of its route is
// free, then keeps each link busy for the time that link needs to serialise its bytes (a fast
// link on a slow path is not blocked for the whole transfer), and arrives after the route's
// alphas plus bytes / bottleneck bandwidth.
#include <queue>
#include <tuple>

#include "network.hpp"

namespace optiflow::sim {
namespace {

class AlphaBetaNetwork final : public Network {
 public:
  AlphaBetaNetwork(const topology::Topology& topology, const StepGraph& graph)
      : graph_(graph), free_at_(topology.link_count(), 0), bw_GBps_(topology.link_count()) {
    for (topology::LinkId l = 0; l < topology.link_count(); ++l)
      bw_GBps_[l] = topology.link(l).bw_GBps;
    started_us.assign(graph.transfers.size(), 0);
    busy_us.assign(topology.link_count(), 0);
    bytes.assign(topology.link_count(), 0);
  }

  void launch(std::int32_t id, double size, double now) override {
    const SimTransfer& t = graph_.transfers[static_cast<std::size_t>(id)];
    double start = now;
    for (std::int32_t i = t.route_begin; i < t.route_end; ++i)
      start = std::max(start, free_at_[graph_.route_links[static_cast<std::size_t>(i)]]);
    for (std::int32_t i = t.route_begin; i < t.route_end; ++i) {
      const topology::LinkId l = graph_.route_links[static_cast<std::size_t>(i)];
      const double serialise = size / (bw_GBps_[l] * 1e3);  // GB/s = 1e3 bytes per microsecond
      free_at_[l] = start + serialise;
      busy_us[l] += serialise;
      bytes[l] += size;
    }
    started_us[static_cast<std::size_t>(id)] = start;
    arrivals_.push({start + t.alpha_us + size / (t.bottleneck_GBps * 1e3), sequence_++, id});
  }

  double next_arrival() override {
    return arrivals_.empty() ? kNever : std::get<0>(arrivals_.top());
  }

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
  std::vector<double> bw_GBps_;
  std::priority_queue<Arrival, std::vector<Arrival>, std::greater<>> arrivals_;
  std::uint64_t sequence_ = 0;
};

}  // namespace

std::unique_ptr<Network> make_alpha_beta_network(const topology::Topology& topology,
                                                 const StepGraph& graph) {
  return std::make_unique<AlphaBetaNetwork>(topology, graph);
}

}  // namespace optiflow::sim
