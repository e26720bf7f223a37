// Built-in topologies: a100xK, a100x4-degraded, h100xK, dgx1, ndv2x2, ring<N>, torus<X>x<Y>,
// fullmesh<N>, fattree<N>. Their figures and sources are in docs/topologies.md and in the
// table at the top of generators.cpp.
#pragma once

#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "optiflow/topology/topology.hpp"

namespace optiflow::topology {

/// One family of built-in topologies, for `optiflow topo list`.
struct BuiltinFamily {
  std::string pattern;      ///< e.g. "a100x<K>"
  std::string example;      ///< a concrete name, e.g. "a100x4"
  std::string description;  ///< one line
};

std::vector<BuiltinFamily> builtin_families();

/// Builds the built-in topology called `name`, or nullopt when no family matches.
/// Throws InputError when a family matches but its parameter is out of range (e.g. "ring1").
std::optional<Topology> make_builtin_topology(std::string_view name);

/// K DGX-A100 nodes: 8 GPUs each on NVSwitch (240 GB/s per GPU per direction: NCCL's 20 GB/s
/// per NVLink3 x 12), one 25 GB/s HDR NIC per GPU over PCIe 4.0, NIC i of every node on rail
/// leaf switch i, leaves joined by a non-blocking spine. K = 1 has no NICs or network.
Topology make_a100(int nodes);
/// K DGX-H100 nodes, the shape and node names of make_a100: NVSwitch at 370.8 GB/s per GPU per
/// direction (NCCL's 20.6 GB/s per NVLink4 x 18), one 50 GB/s NDR NIC per GPU over PCIe 5.0.
Topology make_h100(int nodes);
Topology make_a100x4_degraded();
Topology make_dgx1();
Topology make_ndv2(int nodes);
Topology make_ring(int ranks);
Topology make_torus(int x, int y);
Topology make_fullmesh(int ranks);
Topology make_fattree(int ranks);

}  // namespace optiflow::topology
