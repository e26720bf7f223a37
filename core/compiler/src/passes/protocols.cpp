// The protocols pass: the protocol per power-of-two size, from each protocol's estimated
// latency and the data rate the order pass found.
#include <algorithm>

#include "pass_table.hpp"

namespace optiflow::compiler::passes {
namespace {

// With no data the links never queue, so the list schedule is the longest chain of transfer
// latencies, plus the launch cost: one pass in index order (every dependency has a lower
// index).
double latency_us(const Plan& plan, const topology::Topology& topology,
                  topology::Protocol protocol) {
  const std::vector<topology::TransferCost> costs = route_costs(plan, topology, protocol);
  std::vector<double> done(plan.transfers.size());
  double last = 0;
  for (std::size_t t = 0; t < plan.transfers.size(); ++t) {
    double ready = 0;
    for (std::int32_t d : plan.deps[t]) ready = std::max(ready, done[at(d)]);
    done[t] = ready + costs[at(plan.transfers[t].route)].latency_us;
    last = std::max(last, done[t]);
  }
  return topology::protocol_costs(protocol).launch_us + last;
}

}  // namespace

std::vector<std::pair<std::uint64_t, topology::Protocol>> choose_protocols(
    const Plan& plan, const topology::Topology& topology, std::uint64_t reference_size_bytes) {
  if (plan.protocol) return {{1, *plan.protocol}};
  // Time is close to affine in size for a fixed schedule (NCCL's tuner makes the same
  // assumption): the latency with no data, plus a slope. The order pass measured Simple's at
  // the reference size; the other protocols move data at their share of the bandwidth (one
  // share for every hop class in the protocol table).
  double last_us = 0;
  for (const Transfer& t : plan.transfers) last_us = std::max(last_us, t.finish_us);
  const double simple_us = topology::protocol_costs(topology::Protocol::simple).launch_us + last_us;
  const double simple_latency = latency_us(plan, topology, topology::Protocol::simple);
  const double simple_slope =
      std::max(0.0, simple_us - simple_latency) / static_cast<double>(reference_size_bytes);
  struct Line {
    topology::Protocol protocol;
    double latency_us, slope;
  };
  std::vector<Line> lines;  // the protocols NCCL enables on this topology
  for (topology::Protocol protocol : topology::kProtocols)
    if (topology::protocol_enabled(topology, protocol))
      lines.push_back(
          {protocol, latency_us(plan, topology, protocol),
           simple_slope / topology::protocol_costs(protocol).share(topology::HopClass::nvlink)});
  // Powers of two up to 2^40: the sizes collectives are measured at.
  std::vector<std::pair<std::uint64_t, topology::Protocol>> per_size;
  for (int k = 0; k <= 40; ++k) {
    const double size = static_cast<double>(std::uint64_t{1} << k);
    const auto cost = [&](const Line& line) { return line.latency_us + line.slope * size; };
    const Line* best = &lines.back();  // Simple, which wins ties
    for (const Line& line : lines)
      if (cost(line) < cost(*best)) best = &line;
    per_size.emplace_back(std::uint64_t{1} << k, best->protocol);
  }
  return per_size;
}

void protocols_pass(CompileState& state) {
  state.protocols =
      choose_protocols(state.plan, state.topology, state.options.reference_size_bytes);
}

}  // namespace optiflow::compiler::passes
