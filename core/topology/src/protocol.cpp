#include "optiflow/topology/protocol.hpp"

#include <algorithm>
#include <limits>

namespace optiflow::topology {
namespace {

constexpr double kNoCap = std::numeric_limits<double>::infinity();

// The labelled table (docs/cost-model.md). Source: NCCL v2.23.4-1, src/graph/tuning.cc, the
// ring rows:
//   baseLat[Ring]          = { LL 6.6, LL128 14.0, Simple 8.4 } us          (l.57)
//   hwLat[NVLINK][Ring]    = { .6, 1.9, 3.4 } us                             (l.66)
//   hwLat[PCI][Ring]       = { 1.0, 2.5, 5.7 } us                            (l.70)
//   hwLat[NET][Ring]       = { 2.7, 4.0, 14.0 } us                           (l.74)
// Data shares, from the ring bandwidth refinements (l.188-189): LL's bus bandwidth is 0.5 of
// Simple's, LL128's 0.92 (120 of every 128 bytes are data). NCCL's aggregate caps (llMaxBws,
// perChMaxRingLL128Bws: per GPU generation) are not modelled; docs/cost-model.md says where
// that matters.
constexpr std::array<ProtocolCosts, 3> kTable{{
    {Protocol::ll, 6.6, {0.6, 1.0, 2.7}, {0.5, 0.5, 0.5}, kNoCap},
    {Protocol::ll128, 14.0, {1.9, 2.5, 4.0}, {0.92, 0.92, 0.92}, kNoCap},
    {Protocol::simple, 8.4, {3.4, 5.7, 14.0}, {1.0, 1.0, 1.0}, kNoCap},
}};

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

const ProtocolCosts& protocol_costs(Protocol protocol) {
  return kTable[static_cast<std::size_t>(protocol)];
}

double min_launch_us() {
  return std::ranges::min(kTable, {}, &ProtocolCosts::launch_us).launch_us;
}

}  // namespace optiflow::topology
