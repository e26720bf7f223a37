// The logical topology TACCL synthesizes over (taccl/topologies/topology.py, TACCLTopology, and
// cli/common.py): GPU-to-GPU links with one cost each, the sketch's inter-node relay links, and
// the switch hyperedges whose transfers share a link's time.
#include <algorithm>
#include <cmath>
#include <optional>

#include "optiflow/support/error.hpp"
#include "optiflow/support/sizes.hpp"
#include "optiflow/support/strings.hpp"
#include "optiflow/support/units.hpp"
#include "optiflow/topology/routing.hpp"
#include "taccl_internal.hpp"

namespace optiflow::baselines::taccl {
namespace {

using topology::LinkId;
using topology::NodeId;

[[noreturn]] void fail(const std::string& source, const std::string& field,
                       const std::string& message) {
  throw support::InputError(support::SourceLocation{source, 0, 0, field}, "taccl: " + message);
}

struct PathFigures {
  std::vector<LinkId> route;
  double alpha_us = 0, bw_GBps = 0;
};

PathFigures figures_of(const topology::Topology& topology, std::vector<LinkId> route) {
  PathFigures f;
  f.bw_GBps = route.empty() ? 0 : 1e300;
  for (LinkId l : route) {
    f.alpha_us += topology.link(l).alpha_us;
    f.bw_GBps = std::min(f.bw_GBps, topology.link(l).bw_GBps);
  }
  f.route = std::move(route);
  return f;
}

// Inside a node TACCL sees NVLink: a direct GPU link, or two hops through an NVSwitch (never
// PCIe, which TACCL's node models leave out).
std::optional<PathFigures> intra_path(const topology::Topology& topology, NodeId a, NodeId b) {
  std::optional<PathFigures> best;
  auto consider = [&](std::vector<LinkId> route) {
    PathFigures f = figures_of(topology, std::move(route));
    if (!best || f.bw_GBps > best->bw_GBps) best = std::move(f);
  };
  for (LinkId l : topology.out_links(a))
    if (topology.link(l).dst == b) consider({l});
  if (best) return best;
  for (LinkId l : topology.out_links(a)) {
    const auto& first = topology.link(l);
    if (topology.node(first.dst).kind != topology::NodeKind::switch_ ||
        first.kind == topology::LinkKind::pcie)
      continue;
    for (LinkId m : topology.out_links(first.dst))
      if (topology.link(m).dst == b && topology.link(m).kind != topology::LinkKind::pcie)
        consider({l, m});
  }
  return best;
}

class Builder {
 public:
  Builder(const topology::Topology& topology, const TacclSketch& sketch,
          const topology::TacclProfile* profile)
      : topology_(topology), sketch_(sketch), profile_(profile), router_(topology) {
    logical_.ranks = topology.rank_count();
    logical_.nodes = sketch.nnodes;
    if (logical_.ranks < 2) fail(topology.name(), "gpus", "needs at least two GPUs");
    if (logical_.ranks % sketch.nnodes != 0)
      fail(sketch.source, "nnodes",
           support::strprintf("%d GPUs do not split into %d equal nodes", logical_.ranks,
                              sketch.nnodes));
    logical_.per_node = logical_.ranks / sketch.nnodes;
    if (profile && profile->gpus_per_node != logical_.per_node)
      fail(profile->source, "gpus_per_node",
           support::strprintf("%d GPUs per node, but the topology has %d per node of the "
                              "sketch's %d",
                              profile->gpus_per_node, logical_.per_node, sketch.nnodes));
    check_node_numbering();
    const auto r = static_cast<std::size_t>(logical_.ranks);
    logical_.link_of.assign(r, std::vector<int>(r, -1));
    logical_.cost_unit =
        profile
            ? "TACCL's cost units (us for " + support::format_size(profile->reference_bytes) + ")"
            : "us for " + support::format_size(static_cast<std::uint64_t>(kReferenceBytes));
  }

  LogicalTopology build() {
    add_intra_links();
    if (logical_.nodes > 1) add_remote_links();
    if (sketch_.intra == TacclIntraStrategy::switch_) add_local_switches();
    if (logical_.nodes > 2) add_remote_switches();
    return std::move(logical_);
  }

 private:
  int node_of(int rank) const { return rank / logical_.per_node; }
  int local_of(int rank) const { return rank % logical_.per_node; }

  // TACCL numbers GPUs node by node: rank = node * gpus_per_node + local index.
  void check_node_numbering() const {
    if (logical_.nodes == 1) return;
    std::vector<int> host_of_node(static_cast<std::size_t>(logical_.nodes), -2);
    for (int rank = 0; rank < logical_.ranks; ++rank) {
      const int host = topology_.node(topology_.gpu_of_rank(rank)).host;
      int& expected = host_of_node[static_cast<std::size_t>(node_of(rank))];
      if (expected == -2) expected = host;
      if (host < 0 || host != expected)
        fail(topology_.name(), "nodes",
             support::strprintf("rank %d is on host %d, but TACCL numbers GPUs node by node "
                                "(%d per node of the sketch's %d)",
                                rank, host, logical_.per_node, logical_.nodes));
    }
  }

  void add(int src, int dst, double alpha, double beta, std::vector<LinkId> route) {
    LogicalLink link;
    link.src = src;
    link.dst = dst;
    link.alpha = alpha;
    link.beta = beta;
    link.cost = alpha + beta;
    link.remote = node_of(src) != node_of(dst);
    link.route = std::move(route);
    if (link.route.empty())
      fail(
          topology_.name(), "links",
          support::strprintf("no path from rank %d to rank %d for a link of the sketch", src, dst));
    logical_.link_of[static_cast<std::size_t>(src)][static_cast<std::size_t>(dst)] =
        static_cast<int>(logical_.links.size());
    logical_.links.push_back(std::move(link));
  }

  void add_intra_links() {
    const int n = logical_.per_node;
    for (int node = 0; node < logical_.nodes; ++node)
      for (int a = 0; a < n; ++a)
        for (int b = 0; b < n; ++b) {
          if (a == b) continue;
          const int src = node * n + a, dst = node * n + b;
          const NodeId ga = topology_.gpu_of_rank(src), gb = topology_.gpu_of_rank(dst);
          if (profile_) {
            const auto ua = static_cast<std::size_t>(a), ub = static_cast<std::size_t>(b);
            const int count = profile_->links[ua][ub];
            if (count == 0) continue;
            if (count > 1)
              fail(profile_->source, "links",
                   support::strprintf("GPUs %d and %d have %d parallel links; this baseline "
                                      "models one link per GPU pair",
                                      a, b, count));
            // With a switch sketch TACCL recomputes every cost as int(alpha + beta).
            const double cost = sketch_.intra == TacclIntraStrategy::switch_
                                    ? std::floor(profile_->alpha + profile_->betas[ua][ub])
                                    : profile_->invbws[ua][ub];
            add(src, dst, 0.0, cost, router_.path(ga, gb));
            continue;
          }
          const auto path = intra_path(topology_, ga, gb);
          if (!path) continue;
          add(src, dst, 0.0, path->alpha_us + support::transfer_us(kReferenceBytes, path->bw_GBps),
              path->route);
        }
  }

  // TACCL's _add_ext_edge with the beta split of parse_and_get_topo: the relay links share the
  // node's NICs, so each link's beta grows by (links leaving a node) / (NICs per node).
  void add_remote_links() {
    const int n = logical_.per_node;
    const auto conn = relay_map(sketch_, n);
    int senders = 0, width = 0;
    for (const auto& [gpu, dsts] : conn) {
      ++senders;
      width = static_cast<int>(dsts.size());
      for (int d : dsts)
        if (gpu >= n || d >= n)
          fail(sketch_.source, "internode_sketch.internode_conn",
               support::strprintf("GPU %d -> %d: a node has GPUs 0..%d", gpu, d, n - 1));
    }
    int nics = profile_ ? profile_->nics_per_node : count_nics();
    nics = std::max(nics, 1);
    const double split = static_cast<double>(senders * width) / nics;
    for (int from = 0; from < logical_.nodes; ++from)
      for (int to = 0; to < logical_.nodes; ++to) {
        if (from == to) continue;
        for (const auto& [gpu, dsts] : conn)
          for (int d : dsts) {
            const int src = from * n + gpu, dst = to * n + d;
            std::vector<LinkId> route =
                router_.path(topology_.gpu_of_rank(src), topology_.gpu_of_rank(dst));
            if (profile_) {
              const double beta = std::floor(profile_->remote_beta * split);
              add(src, dst, profile_->remote_alpha,
                  std::floor(profile_->remote_alpha + beta) - profile_->remote_alpha,
                  std::move(route));
              logical_.links.back().beta = beta;  // the scheduler's beta, TACCL's remote_beta
            } else {
              const PathFigures f = figures_of(topology_, std::move(route));
              add(src, dst, f.alpha_us, support::transfer_us(kReferenceBytes, f.bw_GBps) * split,
                  f.route);
            }
          }
      }
  }

  int count_nics() const {
    const int host = topology_.node(topology_.gpu_of_rank(0)).host;
    int nics = 0;
    for (const auto& node : topology_.nodes())
      if (node.kind == topology::NodeKind::nic && node.host == host) ++nics;
    return nics;
  }

  // TACCL's _make_switch: per GPU of a switch group, an "out" hyperedge to the group's other
  // GPUs and an "in" hyperedge from them, each costing one link's time.
  void add_local_switches() {
    const int n = logical_.per_node;
    for (std::size_t s = 0; s < sketch_.switches.size(); ++s) {
      const auto& group = sketch_.switches[s];
      for (std::size_t t = s + 1; t < sketch_.switches.size(); ++t)
        for (int gpu : sketch_.switches[t])
          if (std::find(group.begin(), group.end(), gpu) != group.end())
            fail(sketch_.source, "intranode_sketch.switches",
                 support::strprintf("switches %zu and %zu share GPU %d; this baseline models "
                                    "disjoint switch groups (one link per GPU pair)",
                                    s, t, gpu));
      for (int gpu : group)
        if (gpu >= n)
          fail(sketch_.source, "intranode_sketch.switches",
               support::strprintf("GPU %d: a node has GPUs 0..%d", gpu, n - 1));
      for (int node = 0; node < logical_.nodes; ++node)
        for (int gpu : group) {
          Hyperedge out, in;
          out.out = true;
          out.gpu = in.gpu = node * n + gpu;
          for (int other : group) {
            if (other == gpu) continue;
            const int a = node * n + gpu, b = node * n + other;
            if (logical_.link(a, b) < 0 || logical_.link(b, a) < 0)
              fail(sketch_.source, "intranode_sketch.switches",
                   support::strprintf("the switch joins GPUs %d and %d, which have no link", gpu,
                                      other));
            out.links.push_back(logical_.link(a, b));
            in.links.push_back(logical_.link(b, a));
          }
          if (out.links.empty()) continue;
          out.cost = in.cost = logical_.links[static_cast<std::size_t>(in.links[0])].cost;
          logical_.switches.push_back(std::move(out));
          logical_.switches.push_back(std::move(in));
        }
    }
  }

  // TACCL's _add_ext_switches (more than two nodes): a GPU's relay links in each direction
  // share its NIC's time.
  void add_remote_switches() {
    for (int rank = 0; rank < logical_.ranks; ++rank) {
      Hyperedge out, in;
      out.out = true;
      out.remote = in.remote = true;
      out.gpu = in.gpu = rank;
      for (std::size_t l = 0; l < logical_.links.size(); ++l) {
        const LogicalLink& link = logical_.links[l];
        if (!link.remote) continue;
        if (link.src == rank) out.links.push_back(static_cast<int>(l));
        if (link.dst == rank) in.links.push_back(static_cast<int>(l));
      }
      for (Hyperedge* e : {&out, &in}) {
        if (e->links.empty()) continue;
        e->cost = logical_.links[static_cast<std::size_t>(e->links[0])].cost;
        logical_.switches.push_back(std::move(*e));
      }
    }
  }

  const topology::Topology& topology_;
  const TacclSketch& sketch_;
  const topology::TacclProfile* profile_;
  topology::Router router_;
  LogicalTopology logical_;
};

}  // namespace

LogicalTopology logical_topology(const topology::Topology& topology, const TacclSketch& sketch,
                                 const topology::TacclProfile* profile) {
  return Builder(topology, sketch, profile).build();
}

bool symmetric_under(const LogicalTopology& logical, int offset, int size) {
  if (size < 1 || logical.ranks % size != 0) return false;
  auto rotate = [&](int r) { return (r % size + offset) % size + (r / size) * size; };
  // Every link, also between groups: the routing ties the start times of all ranks, so a chunk
  // must be able to enter each group where its image does.
  for (const LogicalLink& link : logical.links) {
    const int image = logical.link(rotate(link.src), rotate(link.dst));
    if (image < 0) return false;
    const double cost = logical.links[static_cast<std::size_t>(image)].cost;
    if (std::abs(cost - link.cost) > 1e-9 * std::max(1.0, std::abs(cost))) return false;
  }
  return true;
}

}  // namespace optiflow::baselines::taccl
