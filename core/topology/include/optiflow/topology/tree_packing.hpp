// Throughput-optimal spanning-tree packing for All-Gather (ForestColl's goal, arXiv
// 2402.06787): every member broadcasts its share over weighted spanning trees of the group,
// each tree edge a route through switches and NICs, so that no link carries more than its
// bandwidth and every member's data moves at the highest common rate the links allow. For a
// group that is the whole topology that rate is the cut bound's (bounds.hpp).
//
// Construction (our own, not ForestColl's edge splitting): the linear program "maximise the
// common rate x such that each member's trees carry x and each link carries at most its
// bandwidth" over all spanning trees, solved by column generation with COIN-OR CLP: the
// pricing problem for a member is a minimum-cost arborescence (Chu-Liu/Edmonds) over the
// group, an edge costing the cheapest route under the links' dual prices.
#pragma once

#include <cstdint>
#include <set>
#include <span>
#include <vector>

#include "optiflow/topology/topology.hpp"

namespace optiflow::topology {

/// One edge of a tree: `from` sends to `to` along `path` (GPU, switches/NICs..., GPU).
struct PackedEdge {
  int from_rank = 0, to_rank = 0;
  int depth = 1;  ///< 1 for the root's children, 2 for theirs, ...
  std::vector<NodeId> path;
};

/// Each root's data is cut into this many equal parts, spread over its trees.
inline constexpr int kPackParts = 16;

struct PackedTree {
  double share = 0;               ///< the fraction of its root's data it carries
  /// `share` as whole parts of kPackParts, rounded jointly over all trees so that the busiest
  /// link's load grows the least (largest remainders alone can cost a link 7%); may be 0.
  int parts = 0;
  std::vector<PackedEdge> edges;  ///< parents before children (by depth, then rank)
};

struct TreePacking {
  std::vector<int> members;                    ///< ascending ranks
  double rate_GBps = 0;                        ///< each member's data rate, all trees together
  double rounded_rate_GBps = 0;                ///< the rate the trees' `parts` keep
  std::vector<std::vector<PackedTree>> trees;  ///< per member (as in `members`), share-sorted
  int iterations = 0;                          ///< column-generation rounds
};

/// Groups larger than this are refused (the pricing problem grows with the cube of the size).
inline constexpr std::size_t kMaxPackingMembers = 64;

/// Packs trees for the GPUs of `member_ranks` (at least two, each once), over routes that pass
/// only through non-GPU nodes and avoid `avoided` links. Deterministic. Throws
/// support::InputError when some member cannot reach another so, or the group is too large.
TreePacking pack_spanning_trees(const Topology& topology, std::span<const int> member_ranks,
                                const std::set<LinkId>& avoided = {});

}  // namespace optiflow::topology
