// Rings over direct GPU-to-GPU links, searched for the way NCCL searches for its rings: for
// ring-set programs (the offline proposer's templates) and NCCL-style ring baselines.
#pragma once

#include <cstdint>
#include <vector>

#include "optiflow/topology/topology.hpp"

namespace optiflow::topology {

/// One ring: ranks in the order data moves (order[i] sends to order[i + 1], the last rank to
/// order[0]), each rank once, and the bandwidth (GB/s) the ring is given on each of its links.
struct Ring {
  std::vector<int> order;
  double bw_GBps = 0;

  bool operator==(const Ring&) const = default;
};

/// Rings that share the links between them: no directed link carries more than its
/// bandwidth (parallel links between two GPUs add up).
using RingSet = std::vector<Ring>;

struct RingSearch {
  /// Take each ring's reverse as well (it uses the other direction of the same links);
  /// keeping what is left symmetric leaves room for more rings on duplex links.
  bool pair_reverse = false;
  /// 0 breaks ties between equally fat links by rank; other seeds by a seeded hash, so
  /// different seeds find different rings.
  std::uint64_t seed = 0;
};

/// Directed Hamiltonian cycles over direct GPU-to-GPU links (links through switches, NICs or
/// CPUs are not used), one after another: each is a bounded depth-first search from rank 0
/// over links with bandwidth left, fattest links first, and is given the bandwidth of its
/// thinnest link, which is then taken off every link it uses. At most about a dozen rings;
/// empty when there is none (fewer than three ranks, or GPUs without direct links).
/// Deterministic for a given search.
RingSet link_rings(const Topology& topology, const RingSearch& search = {});

/// The sum of the rings' bandwidths.
double total_bw_GBps(const RingSet& rings);

/// The fattest ring set among several seeded searches, without and then with reverse pairs:
/// at most two sets (one when both are the same, none when there are no rings).
std::vector<RingSet> best_ring_sets(const Topology& topology);

}  // namespace optiflow::topology
