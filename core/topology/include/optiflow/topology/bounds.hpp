// Lower bounds on collective time: a max-flow bandwidth bound and a latency bound, under the
// cost model's protocols (protocol.hpp): whichever protocol a schedule runs with, it pays that
// protocol's launch cost, at least one step latency, and moves data at most at its share of
// the links' bandwidth, so the bound is the lowest over protocols.
//
// Step latencies depend on the class of hardware a transfer crosses (NVLink, PCI, network),
// and a transfer is at least of the class of each of its links. So data that must cross an
// InfiniBand link pays at least the network's step latency, not NVLink's: both terms below
// count the class of the links the data cannot avoid.
#pragma once

#include <array>
#include <cstdint>
#include <vector>

#include "optiflow/support/collective.hpp"
#include "optiflow/topology/protocol.hpp"
#include "optiflow/topology/topology.hpp"

namespace optiflow::topology {

/// The bottleneck cut of one All-Gather-shaped phase: the node set X (leaving at least one GPU
/// outside) that maximises |GPUs in X| / (bandwidth of links leaving X). Every byte of the
/// |GPUs in X| * S/N bytes that start in X must cross those links.
struct BottleneckCut {
  std::vector<NodeId> inside;  ///< X, sorted by node id
  int gpus_inside = 0;         ///< |GPUs in X|
  double out_bw_GBps = 0;      ///< total bandwidth of the links leaving X
  double min_alpha_us = 0;     ///< smallest latency among those links
  /// The same two figures per class of those links (HopClass; alpha infinite where none).
  std::array<double, kHopClasses> out_bw_by_class{};
  std::array<double, kHopClasses> min_alpha_by_class{};
};

/// The least total alpha of a path from one GPU to another, per class k: over the paths whose
/// links are all of class k or lower (infinite where there is none). Data on a path whose worst
/// link is of class k pays at least one step latency of class k or higher.
using ClassAlphas = std::array<double, kHopClasses>;

/// One phase's bound as a function of the buffer size S (bytes).
struct PhaseBound {
  BottleneckCut cut;
  int ranks = 0;
  double latency_us = 0;  ///< max over GPU pairs of the lowest-alpha path between them
  /// The distinct ClassAlphas of all ordered GPU pairs.
  std::vector<ClassAlphas> pair_alphas;

  /// Bandwidth term: (S/N) * gpus_inside / out_bw.
  double bandwidth_us(std::uint64_t size_bytes) const;
  /// Under `protocol`: max over GPU pairs of the least alpha plus step latency that a path
  /// between them pays (min over k of alphas[k] + the cheapest step latency of class >= k).
  double path_latency_us(const ProtocolCosts& protocol) const;
  /// Under `protocol`: the least alpha plus step latency of class >= k over the cut links
  /// (k: each link's class).
  double cut_latency_us(const ProtocolCosts& protocol) const;
  /// Under `protocol`: the cut's bytes over its data rate, where a cut link of class k carries
  /// data at its bandwidth times the best share of class >= k.
  double cut_data_us(std::uint64_t size_bytes, const ProtocolCosts& protocol) const;
};

/// The bound at one buffer size, with the algbw/busbw it caps (nccl-tests conventions).
struct BoundAtSize {
  std::uint64_t size_bytes = 0;
  double time_us = 0;
  double bandwidth_us = 0;               ///< the bandwidth terms alone (at the full link bandwidth)
  double latency_us = 0;                 ///< the latency terms alone, with the launch cost
  Protocol protocol = Protocol::simple;  ///< the protocol the bound is lowest with
  double algbw_GBps = 0;
  double busbw_GBps = 0;
};

/// A lower bound for one topology and collective, computed once and evaluated at any size.
/// All-Gather: the cut bound above (exact, via max-flow, not by enumerating sets).
/// Reduce-Scatter: the All-Gather bound of the reversed topology (its time-reversed mirror).
/// All-Reduce: the data of both (Reduce-Scatter's, then All-Gather's) over their cuts, after
/// one cut latency: a pipelined All-Reduce overlaps the two phases' latencies, not their data.
/// Under each protocol: launch + max(path latency, cut latency + the phases' cut data), the
/// last transfer over the busiest cut link starting only after that link has moved everything
/// else, and arriving a latency later.
/// S is the per-rank output (All-Gather) or input (Reduce-Scatter) buffer, or the All-Reduce
/// buffer. Throws support::UnsupportedError for a collective other than these three, and when
/// some GPU cannot reach another (no finite bound; located at the topology's links).
class LowerBound {
 public:
  static LowerBound compute(const Topology& topology, support::Collective collective);

  support::Collective collective() const { return collective_; }
  int ranks() const { return ranks_; }
  /// The phases whose times add up: one for AG and RS, two (RS then AG) for All-Reduce.
  const std::vector<PhaseBound>& phases() const { return phases_; }

  BoundAtSize at(std::uint64_t size_bytes) const;

 private:
  support::Collective collective_ = support::Collective::all_gather;
  int ranks_ = 0;
  std::vector<PhaseBound> phases_;
  std::array<ProtocolCosts, kProtocols.size()> costs_{};  ///< by Protocol, on this topology
};

/// The exact bottleneck cut of an All-Gather on `topology` (or on its reverse), found by
/// Dinkelbach iteration over N max-flow problems (as in ForestColl): for a candidate rate x,
/// a source feeds every GPU at x; some set violates out_bw(X) >= x * |GPUs in X| iff the
/// max-flow to some GPU t falls short of x * N, and the min cut is such a set.
BottleneckCut bottleneck_cut(const Topology& topology, bool reversed);

/// max over ordered GPU pairs (u, v) of the smallest total alpha of a path u -> v.
double latency_bound_us(const Topology& topology);

/// The distinct ClassAlphas over ordered GPU pairs, sorted.
std::vector<ClassAlphas> pair_class_alphas(const Topology& topology);

}  // namespace optiflow::topology
