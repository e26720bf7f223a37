#include "optiflow/topology/protocol.hpp"

#include <algorithm>

namespace optiflow::topology {
namespace {

// The labelled table (docs/cost-model.md). Source: NCCL v2.23.4-1, src/graph/tuning.cc, the
// ring rows:
//   baseLat[Ring]          = { LL 6.6, LL128 14.0, Simple 8.4 } us          (l.57)
//   hwLat[NVLINK][Ring]    = { .6, 1.9, 3.4 } us                             (l.67)
//   hwLat[PCI][Ring]       = { 1.0, 2.5, 5.7 } us                            (l.71)
//   hwLat[NET][Ring]       = { 2.7, 4.0, 14.0 } us                           (l.75)
// Data shares, from the ring bandwidth refinements (l.187-188): LL's bus bandwidth is 0.5 of
// Simple's, LL128's 0.92 (120 of every 128 bytes are data). NCCL's aggregate caps (llMaxBws,
// perChMaxRingLL128Bws: per GPU generation) are not modelled; docs/cost-model.md says where
// that matters.
constexpr std::array<ProtocolCosts, 3> kTable{{
    {Protocol::ll, 6.6, {0.6, 1.0, 2.7}, {0.5, 0.5, 0.5}},
    {Protocol::ll128, 14.0, {1.9, 2.5, 4.0}, {0.92, 0.92, 0.92}},
    {Protocol::simple, 8.4, {3.4, 5.7, 14.0}, {1.0, 1.0, 1.0}},
}};

// getNetOverhead (l.120-125, used l.251-257): on more than one node every step of a ring costs
// at least this, 1 us on Intel x86 (assumed), three times that with Simple.
constexpr double kNetOverheadUs = 1.0;

constexpr std::array<std::string_view, 3> kNames{"LL", "LL128", "Simple"};

}  // namespace

std::string_view to_string(Protocol protocol) {
  return kNames[static_cast<std::size_t>(protocol)];
}

std::optional<Protocol> protocol_from_string(std::string_view name) {
  for (Protocol p : kProtocols)
    if (to_string(p) == name) return p;
  return std::nullopt;
}

std::string_view to_string(HopClass hop) {
  constexpr std::array<std::string_view, kHopClasses> names{"nvlink", "pci", "net"};
  return names[static_cast<std::size_t>(hop)];
}

HopClass hop_class(const Topology& topology, std::span<const LinkId> route) {
  HopClass hop = HopClass::nvlink;
  for (LinkId l : route) {
    switch (topology.link(l).kind) {
      case LinkKind::ib:
      case LinkKind::ethernet:
        return HopClass::net;
      case LinkKind::pcie:
      case LinkKind::cpu:
        hop = HopClass::pci;
        break;
      default:
        break;
    }
  }
  return hop;
}

bool protocol_enabled(const Topology& topology, Protocol protocol) {
  if (protocol != Protocol::ll128) return true;
  const int sm = topology.gpu_sm();
  if (sm != 0 && sm != 70 && sm != 80 && sm != 90) return false;
  for (NodeId gpu : topology.gpus_by_rank()) {
    const std::vector<LinkId> out = topology.out_links(gpu);
    const bool nvlink = std::any_of(out.begin(), out.end(), [&](LinkId l) {
      const LinkKind kind = topology.link(l).kind;
      return kind == LinkKind::nvlink || kind == LinkKind::nvswitch;
    });
    if (!nvlink) return false;
  }
  return true;
}

const ProtocolCosts& protocol_costs(Protocol protocol) {
  return kTable[static_cast<std::size_t>(protocol)];
}

double network_step_overhead_us(Protocol protocol) {
  return kNetOverheadUs * (protocol == Protocol::simple ? 3 : 1);
}

ProtocolCosts table_costs(const Topology& topology, Protocol protocol) {
  ProtocolCosts costs = protocol_costs(protocol);
  if (topology.host_count() > 1)
    for (double& step : costs.step_latency_us)
      step = std::max(step, network_step_overhead_us(protocol));
  return costs;
}

ProtocolCosts protocol_costs(const Topology& topology, Protocol protocol) {
  if (!topology.runtime()) return table_costs(topology, protocol);
  ProtocolCosts costs{protocol, topology.runtime()->launch_us, {}, {}};
  costs.data_share.fill(1.0);
  return costs;
}

double min_launch_us() {
  return std::ranges::min(kTable, {}, &ProtocolCosts::launch_us).launch_us;
}

}  // namespace optiflow::topology
