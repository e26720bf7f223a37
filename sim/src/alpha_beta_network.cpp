// Alpha-beta: every link is a FIFO server (topology::FifoLinks, the model the compiler's
// scheduler uses too). A transfer keeps each link of its route busy for the time that link
// needs to serialise its bytes, from when the data reaches it, and arrives after the route's
// latency plus bytes / data rate.
#include "network.hpp"
#include "optiflow/topology/link_cost.hpp"

namespace optiflow::sim {
namespace {

class AlphaBetaNetwork final : public Network {
 public:
  AlphaBetaNetwork(const topology::Topology& topology, const StepGraph& graph)
      : graph_(graph), links_(topology) {
    started_us.assign(graph.transfers.size(), 0);
  }

  void launch(std::int32_t id, double size, const topology::TransferCost& cost,
              double now) override {
    const auto booking = links_.book(graph_.route(graph_.transfer(id)), cost, size, now);
    started_us[static_cast<std::size_t>(id)] = booking.start_us;
    arrivals_.push(booking.arrival_us, id);
  }

  double next_arrival() override { return arrivals_.next_time(); }

  void take_arrivals(double now, std::vector<std::int32_t>& arrived) override {
    while (arrivals_.next_time() <= now) arrived.push_back(arrivals_.pop());
  }

  const std::vector<double>& link_busy_us() const override { return links_.busy_us(); }
  const std::vector<double>& link_bytes() const override { return links_.bytes(); }

 private:
  const StepGraph& graph_;
  topology::FifoLinks links_;
  EventQueue<std::int32_t> arrivals_;  // transfer ids
};

}  // namespace

std::unique_ptr<Network> make_alpha_beta_network(const topology::Topology& topology,
                                                 const StepGraph& graph) {
  return std::make_unique<AlphaBetaNetwork>(topology, graph);
}

}  // namespace optiflow::sim
