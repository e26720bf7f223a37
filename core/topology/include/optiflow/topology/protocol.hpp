// NCCL's three protocols and what each costs, from NCCL's own tuner model
// (src/graph/tuning.cc); the one labelled table is in protocol.cpp and docs/cost-model.md.
//
// A protocol changes three things about a transfer: a fixed cost per collective (kernel
// launch and setup, NCCL's baseLat), a latency per step that depends on the class of hardware
// the step crosses (NCCL's hwLat: NVLink, PCI, network), and the share of a link's bandwidth
// that carries data (LL moves 8 data bytes in a 16-byte line and polls flags; LL128 uses 120 of
// 128 bytes; Simple uses all of it but pays the most latency per step).
#pragma once

#include <array>
#include <cstdint>
#include <optional>
#include <span>
#include <string_view>

#include "optiflow/topology/topology.hpp"

namespace optiflow::topology {

enum class Protocol : std::uint8_t { ll, ll128, simple };
inline constexpr std::array<Protocol, 3> kProtocols{Protocol::ll, Protocol::ll128,
                                                    Protocol::simple};

/// "LL", "LL128", "Simple", as NCCL and MSCCL XML spell them.
std::string_view to_string(Protocol protocol);
std::optional<Protocol> protocol_from_string(std::string_view name);

/// NCCL's hardware classes for latency (NCCL_HW_NVLINK, NCCL_HW_PCI, NCCL_HW_NET).
enum class HopClass : std::uint8_t { nvlink, pci, net };
inline constexpr std::size_t kHopClasses = 3;
std::string_view to_string(HopClass hop);

/// The class of a route: network if any link is InfiniBand or Ethernet, else PCI if any link
/// is PCIe or a CPU link, else NVLink.
HopClass hop_class(const Topology& topology, std::span<const LinkId> route);

struct ProtocolCosts {
  Protocol protocol = Protocol::simple;
  /// Once per collective, before any data moves (NCCL baseLat, ring).
  double launch_us = 0;
  /// Per step, by HopClass (NCCL hwLat, ring).
  std::array<double, kHopClasses> step_latency_us{};
  /// Share of a link's bandwidth that carries data, by HopClass.
  std::array<double, kHopClasses> data_share{};

  double step_latency(HopClass hop) const { return step_latency_us[static_cast<std::size_t>(hop)]; }
  double share(HopClass hop) const { return data_share[static_cast<std::size_t>(hop)]; }
};

/// The labelled table's row for `protocol`.
const ProtocolCosts& protocol_costs(Protocol protocol);
/// NCCL's floor on the latency of every step of a collective over more than one host
/// (getNetOverhead): the proxy that drives the network paces the intra-node steps too.
double network_step_overhead_us(Protocol protocol);
/// The table's row as NCCL runs it on `topology`: over more than one host, no step latency
/// below network_step_overhead_us (LL's NVLink step: 1.0 us, not 0.6).
ProtocolCosts table_costs(const Topology& topology, Protocol protocol);
/// What `protocol` costs on `topology`: table_costs, or where the topology carries its own
/// runtime's costs (a fitted machine), its launch cost with no step latency and full data share
/// whatever the protocol.
ProtocolCosts protocol_costs(const Topology& topology, Protocol protocol);

/// Whether NCCL runs `protocol` on this topology by default. LL128 only where NCCL tests it
/// (tuning.cc): GPUs of sm 70, 80 or 90 (or not given) joined by NVLink; LL and Simple always.
bool protocol_enabled(const Topology& topology, Protocol protocol);

/// The cheapest launch cost of any protocol: what no schedule can avoid.
double min_launch_us();

}  // namespace optiflow::topology
