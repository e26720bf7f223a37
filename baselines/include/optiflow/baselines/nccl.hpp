// NCCL as NCCL runs (v2.23.4-1): the rings its topology search builds, with its channel
// count, and its tuner's cost model, which picks an algorithm and protocol per size. The
// constants and their source lines are in docs/baselines.md.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "optiflow/schedule/schedule.hpp"
#include "optiflow/support/collective.hpp"
#include "optiflow/topology/protocol.hpp"
#include "optiflow/topology/topology.hpp"

namespace optiflow::baselines {

/// What NCCL's ring search finds on a topology, and what its tuner reads from it.
struct NcclRingGraph {
  int ranks = 0;
  int nodes = 0;     ///< hosts
  int channels = 0;  ///< collective channels: the search's rings, duplicated as NCCL does
  /// One ring per channel: ranks in the order data moves.
  std::vector<std::vector<int>> rings;
  /// Per channel, per ring position p: the links from rings[c][p] to the next rank; empty =
  /// the cheapest path. Across nodes NCCL's PXN sends through the NIC of the GPU the next node
  /// is entered by (NVLink to that GPU, then its rail), so a ring uses one rail throughout.
  std::vector<std::vector<std::vector<topology::LinkId>>> routes;
  /// The ring bus bandwidth NCCL's tuner starts from (graph nChannels x bw per channel): the
  /// channels times what each gets on its busiest link.
  double bus_bw_GBps = 0;
  /// The hardware class inside a node (NCCL's intraHw): NVLink or PCI.
  topology::HopClass intra = topology::HopClass::nvlink;
  int gpu_sm = 0;     ///< 0 when the topology does not say (the tuner then assumes sm80)
  bool ll128 = true;  ///< whether NCCL enables LL128 here (topology::protocol_enabled)
  std::vector<std::string> notes;  ///< how the channel count was chosen
};

/// Throws InputError when the topology has fewer than two ranks.
NcclRingGraph nccl_ring_graph(const topology::Topology& topology);

/// The ranks of each host, hosts by number, each in local order (GPUs without a host number
/// count as one host).
std::vector<std::vector<int>> nccl_hosts(const topology::Topology& topology);

/// NCCL's algorithms as built here, and the hierarchical PAT, which is not NCCL's (no tuner
/// model: it runs Simple at every size).
enum class NcclAlgorithm { ring, tree, pat, pat_hierarchical };
std::string_view to_string(NcclAlgorithm algorithm);

/// The tuner's estimate for one algorithm and protocol: NCCL's latency and bus bandwidth,
/// and its time for `bytes` (nBytes: the whole All-Gather output or Reduce-Scatter input).
struct NcclEstimate {
  NcclAlgorithm algorithm = NcclAlgorithm::ring;
  topology::Protocol protocol = topology::Protocol::simple;
  double latency_us = 0;
  double bus_bw_GBps = 0;
  double time_us = 0;
};

/// The ring estimate under `protocol`, or nullopt where NCCL disables that protocol
/// (LL128 off the NVLink generations it is tested on).
std::optional<NcclEstimate> nccl_ring_estimate(const NcclRingGraph& graph,
                                               support::Collective collective,
                                               topology::Protocol protocol, std::uint64_t bytes);

/// What NCCL's tuner picks at `bytes`: the lowest estimated time over the algorithms this
/// library builds (ring; tree for All-Reduce; PAT for All-Gather) and the protocols NCCL
/// enables.
NcclEstimate nccl_tuner_pick(const NcclRingGraph& graph, support::Collective collective,
                             std::uint64_t bytes);

/// The ring schedule of the graph's channels: the data split evenly over them, each channel
/// a ring of NCCL's steps (nccl_ring.cpp): All-Gather, Reduce-Scatter or All-Reduce (RS then
/// AG in one block); throws InputError for other collectives.
schedule::Schedule nccl_ring_schedule(const NcclRingGraph& graph, support::Collective collective,
                                      const std::string& topology_name);

/// One channel's tree over the ranks (NCCL's double binary tree across nodes, a chain inside
/// each node from the GPU of the channel's rail): each rank's parent (-1 at the root) and
/// children.
struct NcclTree {
  std::vector<int> parent;
  std::vector<std::vector<int>> children;
};

/// One tree per channel of `graph`: the first half the binary tree, the second half its
/// mirror (even node counts) or its shift by one (odd).
std::vector<NcclTree> nccl_trees(const NcclRingGraph& graph, const topology::Topology& topology);

/// Pieces per channel the tree pipelines its share of the buffer in.
inline constexpr int kNcclTreePieces = 8;

/// The tree All-Reduce: per channel and piece, reduce up the tree, then broadcast down.
/// Throws InputError for other collectives.
schedule::Schedule nccl_tree_schedule(const std::vector<NcclTree>& trees, int ranks,
                                      support::Collective collective,
                                      const std::string& topology_name);

/// NCCL's tree estimate for All-Reduce (tuning.cc): nullopt for other collectives and where
/// NCCL disables the protocol.
std::optional<NcclEstimate> nccl_tree_estimate(const NcclRingGraph& graph,
                                               support::Collective collective,
                                               topology::Protocol protocol, std::uint64_t bytes);

/// Whether PAT runs: All-Gather with one GPU per node (NCCL's restriction, ncclPatEnable) on a
/// power-of-two number of ranks (this baseline's).
bool nccl_pat_runs(const NcclRingGraph& graph, support::Collective collective);

/// PAT's All-Gather: log2(N) rounds, far peers first (nccl_pat.cpp). Throws InputError where
/// it does not run.
schedule::Schedule nccl_pat_schedule(const NcclRingGraph& graph, support::Collective collective,
                                     const std::string& topology_name);

/// Not an NCCL algorithm, and named so: PAT across nodes among the GPUs of each rail (local
/// index), then every GPU hands what its rail gathered to the other GPUs of its node directly.
/// For All-Gather on a power-of-two number of nodes with the same GPUs per node.
schedule::Schedule hierarchical_pat_schedule(const topology::Topology& topology,
                                             support::Collective collective);

/// NCCL's PAT estimate (Simple only): nullopt where PAT does not run.
std::optional<NcclEstimate> nccl_pat_estimate(const NcclRingGraph& graph,
                                              support::Collective collective,
                                              topology::Protocol protocol, std::uint64_t bytes);

}  // namespace optiflow::baselines
