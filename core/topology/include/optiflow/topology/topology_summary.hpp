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

struct TopologySummary {
  int ranks = 0;
  int hosts = 0;
  int gpus = 0, nics = 0, switches = 0, cpus = 0;
  std::vector<LinkClass> link_classes;           ///< fastest first
  std::vector<GpuBandwidthGroup> gpu_bandwidth;  ///< in order of the lowest rank of each group
};

TopologySummary summarize(const Topology& topology);

/// "0-3,8,10-11" for a sorted list of ranks.
std::string format_rank_ranges(const std::vector<int>& sorted_ranks);

/// The GPUs among `nodes` as a rank list, e.g. "ranks 0-7" (for describing cuts).
std::string describe_gpus(const Topology& topology, const std::vector<NodeId>& nodes);

}  // namespace optiflow::topology
