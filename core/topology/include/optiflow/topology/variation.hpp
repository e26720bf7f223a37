// Production faults drawn on any topology, for benchmarks of how schedules hold up on the
// cluster a user has rather than the one templates were written for (`optiflow topo vary`,
// bench/variability.py).
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "optiflow/topology/topology.hpp"

namespace optiflow::topology {

/// What can go wrong, each drawn where the topology has what it needs.
enum class FaultKind {
  slow_nic,       ///< a NIC's network link (both ways) at 10-75% of its bandwidth
  slow_nvlink,    ///< a GPU's NVLink or NVSwitch port (both ways) at 25-75%
  failed_link,    ///< a link between switches, NICs or GPUs gone (both ways); GPUs stay connected
  oversubscribed, ///< every link between switches at 1/2 or 1/4 of its bandwidth (2:1, 4:1)
  missing_gpu,    ///< one GPU of a host with more than two gone, with the NIC only it used
};

struct Fault {
  FaultKind kind = FaultKind::slow_nic;
  std::string description;  ///< e.g. "h1.nic3 <-> leaf3 at 0.27 of 25 GB/s"
};

struct Variation {
  Topology topology;          ///< named "<name>-vary-s<seed>-k<faults>"
  std::vector<Fault> faults;  ///< in the order drawn
};

/// Draws `faults` faults on `base` with `seed`: the same inputs give the same topology, on any
/// machine. Every fault keeps every GPU able to reach every other. Throws InputError when
/// fewer faults than asked can be drawn (a ring has no NIC, no switch and no spare GPU).
Variation draw_faults(const Topology& base, std::uint64_t seed, int faults);

std::string_view to_string(FaultKind kind);

}  // namespace optiflow::topology
