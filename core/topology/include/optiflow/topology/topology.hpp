// The topology model: a directed multigraph of GPUs, NICs, switches and CPUs joined by links.
#pragma once

#include <boost/graph/adjacency_list.hpp>
#include <cstdint>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <vector>

namespace optiflow::topology {

using NodeId = std::uint32_t;
using LinkId = std::uint32_t;

enum class NodeKind { gpu, nic, switch_, cpu };
/// The fastest link a topology may have (GB/s): a petabyte per second, far past any hardware,
/// and small enough that the bound's integer max-flow cannot overflow.
inline constexpr double kMaxLinkGBps = 1e6;

enum class LinkKind { nvlink, nvswitch, pcie, ib, ethernet, cpu, other };

/// Lower-case names used in files and output ("gpu", "switch", "nvlink", ...).
std::string_view to_string(NodeKind kind);
std::string_view to_string(LinkKind kind);
std::optional<NodeKind> node_kind_from_string(std::string_view name);
std::optional<LinkKind> link_kind_from_string(std::string_view name);

/// A vertex. Only GPUs carry a rank (dense 0..N-1); `host` and `local` (index within the host)
/// are -1 when unknown or not applicable.
struct Node {
  std::string id;
  NodeKind kind = NodeKind::gpu;
  int rank = -1;
  int host = -1;
  int local = -1;

  bool operator==(const Node&) const = default;
};

/// One direction of a physical connection. Bandwidth in GB/s (1e9 bytes/s), latency in us.
struct Link {
  NodeId src = 0;
  NodeId dst = 0;
  LinkKind kind = LinkKind::other;
  double bw_GBps = 0;
  double alpha_us = 0;

  bool operator==(const Link&) const = default;
};

/// The figures of a link without its endpoints, for building topologies.
struct LinkSpec {
  LinkKind kind = LinkKind::other;
  double bw_GBps = 0;
  double alpha_us = 0;
};

/// The messages up to `max_bytes` (0: any larger one) of a runtime fitted to a machine: each
/// costs `alpha_us` (on top of its route's latency, or, with RuntimeCosts::serial_steps, at
/// either end's core) and moves at `bw_factor` (0 < f <= 1) of its links' bandwidth. Runtimes
/// switch protocol with the message size (MPI's eager and rendezvous transfers, the caches a copy
/// fits in), which one alpha and one bandwidth per link cannot say.
struct MessageBand {
  std::uint64_t max_bytes = 0;
  double alpha_us = 0;
  double bw_factor = 1;

  bool operator==(const MessageBand&) const = default;
};

/// The costs of a runtime measured on the machine (`optiflow calibrate --from-db`), in place of
/// NCCL's protocol table: one launch cost per collective, no per-protocol step latency or data
/// share, and costs by message size.
struct RuntimeCosts {
  double launch_us = 0;
  std::vector<MessageBand> bands;  ///< ascending max_bytes; the last one holds every larger size
  /// A rank's steps pay the per-step overhead, and its messages their band's alpha, one at a
  /// time: the runtime progresses all of a rank's thread blocks on one core (the MPI runner),
  /// where a GPU runs them side by side.
  bool serial_steps = false;

  /// The band of a message of `bytes`; nullptr when there are no bands.
  const MessageBand* band_for(double bytes) const;
  bool operator==(const RuntimeCosts&) const = default;
};

/// A directed multigraph (parallel links allowed) on Boost.Graph, with value-type nodes and
/// links addressable by dense ids. Ids are assigned in insertion order, so building the same
/// topology twice gives identical ids, and every algorithm over it is deterministic.
class Topology {
 public:
  /// Edge bundle of the Boost graph: the id of the link it stands for.
  struct EdgeRef {
    LinkId link = 0;
  };
  using Graph = boost::adjacency_list<boost::vecS, boost::vecS, boost::bidirectionalS,
                                      boost::no_property, EdgeRef>;

  explicit Topology(std::string name = {}) : name_(std::move(name)) {}

  const std::string& name() const { return name_; }
  void set_name(std::string name) { name_ = std::move(name); }

  /// Fixed cost per operation (kernel launch, protocol), added by the simulator to every step.
  double op_overhead_us() const { return op_overhead_us_; }
  void set_op_overhead_us(double us) { op_overhead_us_ = us; }

  /// The GPUs' compute capability as NCCL reads it (70 V100, 80 A100, 90 H100); 0 = unknown.
  /// NCCL's tuner caps LL and LL128 by GPU generation.
  int gpu_sm() const { return gpu_sm_; }
  void set_gpu_sm(int sm) { gpu_sm_ = sm; }

  /// The runtime's own costs where they were fitted to a machine; absent: NCCL's protocol table.
  const std::optional<RuntimeCosts>& runtime() const { return runtime_; }
  void set_runtime(std::optional<RuntimeCosts> runtime) { runtime_ = std::move(runtime); }

  /// Adds a node; its `id` must be unique (checked by validate()).
  NodeId add_node(Node node);
  LinkId add_link(NodeId src, NodeId dst, const LinkSpec& spec);
  /// Adds src->dst and dst->src with the same figures; returns the forward link.
  LinkId add_duplex(NodeId a, NodeId b, const LinkSpec& spec);

  std::size_t node_count() const { return nodes_.size(); }
  std::size_t link_count() const { return links_.size(); }
  std::span<const Node> nodes() const { return nodes_; }
  std::span<const Link> links() const { return links_; }
  const Node& node(NodeId id) const { return nodes_.at(id); }
  const Link& link(LinkId id) const { return links_.at(id); }
  std::optional<NodeId> find_node(std::string_view id) const;

  /// Links leaving / entering a node, in insertion order.
  std::vector<LinkId> out_links(NodeId node) const;
  std::vector<LinkId> in_links(NodeId node) const;

  /// Number of GPUs (= ranks).
  int rank_count() const { return static_cast<int>(gpu_by_rank_.size()); }
  /// The GPU node of a rank; requires validate() to have passed.
  NodeId gpu_of_rank(int rank) const { return gpu_by_rank_.at(static_cast<std::size_t>(rank)); }
  std::span<const NodeId> gpus_by_rank() const { return gpu_by_rank_; }
  /// Number of distinct hosts among GPUs (0 when none is known).
  int host_count() const;

  /// Checks the invariants every algorithm relies on: unique node ids, GPU ranks dense 0..N-1,
  /// ranks only on GPUs, positive bandwidths, non-negative latencies, no self-loops.
  /// Throws InputError naming the offending node or link (with `source` as the file).
  void validate(const std::string& source = "topology") const;

  const Graph& graph() const { return graph_; }

  bool operator==(const Topology& other) const {
    return name_ == other.name_ && op_overhead_us_ == other.op_overhead_us_ &&
           gpu_sm_ == other.gpu_sm_ && runtime_ == other.runtime_ && nodes_ == other.nodes_ &&
           links_ == other.links_;
  }

 private:
  void index_rank(NodeId node);

  std::string name_;
  double op_overhead_us_ = 0;
  int gpu_sm_ = 0;
  std::optional<RuntimeCosts> runtime_;
  std::vector<Node> nodes_;
  std::vector<Link> links_;
  std::vector<NodeId> gpu_by_rank_;  // filled as GPUs are added; holes checked by validate()
  Graph graph_;
};

}  // namespace optiflow::topology
