// How transfers share links: the part of the simulator that differs between the two models.
// The event loop (simulator.cpp) is a template over the model, so that its calls into the
// network, several per transfer, are direct and inlined.
#pragma once

#include <concepts>
#include <cstdint>
#include <vector>

#include "optiflow/topology/link_cost.hpp"

namespace optiflow::sim {

/// In-flight transfers. The event loop launches transfers and asks when the next one
/// arrives; everything is deterministic (ties in launch order).
/// - launch(id, bytes, cost, now): transfer `id` of `bytes` of data, costing `cost`, is handed
///   to its connection at `now` (never earlier than the last call);
/// - next_arrival(): when the next transfer arrives; kNever when none is in flight;
/// - take_arrivals(now, arrived): moves time to `now` and appends the transfers that have
///   arrived by then, in order;
/// - link_busy_us(), link_bytes(): per link, time with data on it and bytes carried;
/// - started_us: when each transfer's data started to move (after waiting for links).
template <class N>
concept Network = requires(N network, const N& view, std::int32_t id, double value,
                           const topology::TransferCost& cost, std::vector<std::int32_t>& out) {
  network.launch(id, value, cost, value);
  { network.next_arrival() } -> std::same_as<double>;
  network.take_arrivals(value, out);
  { view.link_busy_us() } -> std::same_as<const std::vector<double>&>;
  { view.link_bytes() } -> std::same_as<const std::vector<double>&>;
  { view.started_us } -> std::convertible_to<const std::vector<double>&>;
};

}  // namespace optiflow::sim
