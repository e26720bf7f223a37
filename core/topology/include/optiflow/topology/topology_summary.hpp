// Figures that describe a topology at a glance: link classes and per-GPU bandwidth.
#pragma once

#include <string>
#include <vector>

#include "optiflow/topology/topology.hpp"

namespace optiflow::topology {

/// Links grouped by (kind, bandwidth, latency); `count` counts directed links.
struct LinkClass {
  LinkKind kind = LinkKind::other;
  double bw_GBps = 0;
  double alpha_us = 0;
  int count = 0;
};

/// GPUs with identical ingress and egress bandwidth, as rank ranges.
struct GpuBandwidthGroup {
  std::string ranks;  ///< e.g. "0-10,12-31"
  int gpu_count = 0;
  double ingress_GBps = 0;
  double egress_GBps = 0;
};

/// A link (or a pair, one each way) whose bandwidth is not that of most links of its class (the
/// same kind and latency): a degraded NIC, a half-speed NVLink. What a proposer needs to aim
/// at a fault: where it is, whose data crosses it, and how far off it is.
struct DeviantLink {
  std::string from, to;    ///< node ids
  bool both_ways = false;  ///< the reverse link deviates alike
  LinkKind kind = LinkKind::other;
  double bw_GBps = 0;
  double class_bw_GBps = 0;  ///< what most links of its class carry
  std::string ranks;         ///< the GPUs at its ends or behind a NIC at its ends, e.g. "11"

  double fraction() const { return bw_GBps / class_bw_GBps; }
  /// "h1.nic3 <-> leaf3 (ib, ranks 11): 6.25 GB/s, 0.25 of its class's 25 GB/s".
  std::string describe() const;
};

struct TopologySummary {
  int ranks = 0;
  int hosts = 0;
  int gpus = 0, nics = 0, switches = 0, cpus = 0;
  std::vector<LinkClass> link_classes;           ///< fastest first
  std::vector<GpuBandwidthGroup> gpu_bandwidth;  ///< in order of the lowest rank of each group
  std::vector<DeviantLink> deviant_links;        ///< in link order
};

TopologySummary summarize(const Topology& topology);

/// "0-3,8,10-11" for a sorted list of ranks.
std::string format_rank_ranges(const std::vector<int>& sorted_ranks);

/// The GPUs among `nodes` as a rank list, e.g. "ranks 0-7" (for describing cuts).
std::string describe_gpus(const Topology& topology, const std::vector<NodeId>& nodes);

}  // namespace optiflow::topology
