#include "templates.hpp"

#include <algorithm>
#include <cmath>
#include <limits>
#include <map>
#include <optional>

#include "optiflow/topology/rings.hpp"
#include "optiflow/topology/routing.hpp"
#include "optiflow/topology/tree_packing.hpp"

namespace optiflow::propose {
namespace {

bool power_of_two(int n) {
  return n > 0 && (n & (n - 1)) == 0;
}

struct Shape {
  int ranks = 0, hosts = 0, per_host = 0;
};

Shape shape_of(const topology::Topology& topo) {
  Shape s;
  s.ranks = topo.rank_count();
  for (topology::NodeId gpu : topo.gpus_by_rank()) {
    s.hosts = std::max(s.hosts, topo.node(gpu).host + 1);
    s.per_host = std::max(s.per_host, topo.node(gpu).local + 1);
  }
  return s;
}

// Each GPU's bandwidth to the network: its NIC port, the slower direction of GPU -> NIC ->
// switch and back. Empty when GPUs have no NICs.
std::vector<double> network_bandwidth(const topology::Topology& topo) {
  std::vector<double> bw;
  auto port = [&](topology::NodeId from, topology::NodeKind via, topology::NodeKind to) {
    double best = 0;
    for (topology::LinkId first : topo.out_links(from)) {
      const topology::NodeId middle = topo.link(first).dst;
      if (topo.node(middle).kind != via) continue;
      for (topology::LinkId second : topo.out_links(middle))
        if (topo.node(topo.link(second).dst).kind == to)
          best = std::max(best, std::min(topo.link(first).bw_GBps, topo.link(second).bw_GBps));
    }
    return best;
  };
  for (topology::NodeId gpu : topo.gpus_by_rank()) {
    const double out = port(gpu, topology::NodeKind::nic, topology::NodeKind::switch_);
    double in = 0;  // switch -> NIC -> this GPU
    for (topology::LinkId last : topo.in_links(gpu)) {
      const topology::NodeId nic = topo.link(last).src;
      if (topo.node(nic).kind != topology::NodeKind::nic) continue;
      for (topology::LinkId l : topo.in_links(nic))
        if (topo.node(topo.link(l).src).kind == topology::NodeKind::switch_)
          in = std::max(in, std::min(topo.link(l).bw_GBps, topo.link(last).bw_GBps));
    }
    if (out == 0 || in == 0) return {};
    bw.push_back(std::min(out, in));
  }
  return bw;
}

std::string decimal(double x) {
  const long twentieths = std::lround(std::clamp(x, 0.05, 0.95) * 20);
  const std::string digits = std::to_string(twentieths * 5);
  return "0." + std::string(digits.size() < 2 ? "0" : "") + digits;
}

std::vector<std::string> hierarchical(const Shape& s) {
  std::vector<std::string> out;
  std::vector<std::string> inter = {"ring", "bruck", "direct"};
  if (power_of_two(s.hosts)) inter.insert(inter.begin(), "rd");
  for (const auto& across : inter)
    for (const std::string intra : {"direct", "ring"})
      for (const std::string pipeline : {"", "pipeline 4\n"})
        out.push_back(pipeline + across + " over rails\n" + intra + " over hosts\n");
  return out;
}

// The slowest GPUs send part of their data through their host's peers instead.
std::vector<std::string> around_slow_links(const std::vector<double>& bw, const Shape& s) {
  if (bw.empty()) return {};
  std::vector<double> sorted = bw;
  std::sort(sorted.begin(), sorted.end());
  const double typical = sorted[sorted.size() / 2];
  std::vector<std::string> out;
  for (int r = 0; r < s.ranks; ++r) {
    const double f = bw[static_cast<std::size_t>(r)] / typical;
    if (f > 0.9) continue;
    const std::string keep = decimal(f), hand = decimal(1 - f);
    const std::string across = power_of_two(s.hosts) ? "rd" : "bruck";
    for (const std::string pipeline : {"", "pipeline 4\n"})
      out.push_back(pipeline + "let slow = " + std::to_string(r) +
                    "\nsplit {\n  weight (rank == slow ? " + keep + " : 1) {\n    " + across +
                    " over rails\n    direct over hosts\n  }\n  weight (rank == slow ? " + hand +
                    " : 0) {\n    scatter over hosts\n    " + across +
                    " over rails\n    direct over hosts\n  }\n}\n");
    if (out.size() >= 8) break;
  }
  return out;
}

// The NIC a GPU reaches the network through (the fastest where it has several).
std::optional<topology::NodeId> nic_of(const topology::Topology& topo, topology::NodeId gpu) {
  std::optional<topology::NodeId> best;
  double best_bw = 0;
  for (topology::LinkId l : topo.out_links(gpu)) {
    const topology::Link& link = topo.link(l);
    if (topo.node(link.dst).kind == topology::NodeKind::nic && link.bw_GBps > best_bw) {
      best = link.dst;
      best_bw = link.bw_GBps;
    }
  }
  return best;
}

// The smallest denominator D <= 64 that writes every weight as some k/D to within 0.001.
int common_denominator(const std::vector<double>& weights) {
  for (int d = 1; d < 64; ++d) {
    const bool close = std::all_of(weights.begin(), weights.end(), [&](double w) {
      return std::abs(w * d - std::round(w * d)) <= 0.001 * d;
    });
    if (close) return d;
  }
  return 64;
}

// `local == 0 ? k0 : local == 1 ? k1 : ... : k_last`, for per-rail weights.
std::string per_local(const std::vector<long>& values) {
  std::string text;
  for (std::size_t l = 0; l + 1 < values.size(); ++l)
    if (values[l] != values.back())
      text += "local == " + std::to_string(l) + " ? " + std::to_string(values[l]) + " : ";
  return text + std::to_string(values.back());
}

// Rails of unequal bandwidth (a slow NIC slows its whole rail): each rail carries data in
// proportion to its bandwidth. GPU l keeps w_l of its share on its own rail and scatters the
// rest evenly over its host's other GPUs, which send it on their rails. Rail l then carries
// a_l = w_l + (S - (1 - w_l)) / (L - 1) shares per host, S the scattered total; with
// a_l = L c_l / sum(c) that gives w_l = (a_l (L - 1) - S + 1) / L, and the least scattering
// that keeps every w_l <= 1 is S = (max a - 1)(L - 1). The router would send a slow NIC's
// traffic around it through a peer GPU (onto another rail), so each rail transfer that
// touches a slow NIC is pinned to its rail's own NICs.
std::vector<std::string> balanced_rails(const topology::Topology& topo,
                                        const std::vector<double>& bw, const Shape& s) {
  if (bw.empty() || s.hosts < 2 || s.per_host < 2 || s.ranks != s.hosts * s.per_host) return {};
  const auto L = static_cast<std::size_t>(s.per_host);
  std::vector<std::vector<int>> rank_at(static_cast<std::size_t>(s.hosts), std::vector<int>(L));
  for (int r = 0; r < s.ranks; ++r) {
    const topology::Node& gpu = topo.node(topo.gpu_of_rank(r));
    rank_at[static_cast<std::size_t>(gpu.host)][static_cast<std::size_t>(gpu.local)] = r;
  }
  std::vector<double> rail(L, std::numeric_limits<double>::infinity());
  for (const auto& host : rank_at)
    for (std::size_t l = 0; l < L; ++l)
      rail[l] = std::min(rail[l], bw[static_cast<std::size_t>(host[l])]);
  const auto [slowest, fastest] = std::minmax_element(rail.begin(), rail.end());
  if (*slowest > 0.95 * *fastest) return {};
  double total = 0;
  for (double c : rail) total += c;
  const double n = static_cast<double>(L);
  const double scattered = (n * *fastest / total - 1) * (n - 1);
  std::vector<double> keep(L);
  for (std::size_t l = 0; l < L; ++l)
    keep[l] = std::clamp((n * rail[l] / total * (n - 1) - scattered + 1) / n, 0.0, 1.0);
  const int d = common_denominator(keep);
  std::vector<long> kept(L), handed(L);
  for (std::size_t l = 0; l < L; ++l) {
    kept[l] = std::lround(keep[l] * d);
    handed[l] = d - kept[l];
  }

  // Pins: both ring neighbours of every GPU whose NIC is slower than the fastest.
  std::vector<topology::LinkId> gpu_links;  // the network paths between NICs avoid GPUs
  for (topology::LinkId l = 0; l < topo.link_count(); ++l)
    if (topo.node(topo.link(l).src).kind == topology::NodeKind::gpu ||
        topo.node(topo.link(l).dst).kind == topology::NodeKind::gpu)
      gpu_links.push_back(l);
  topology::Router router(topo);
  auto quoted = [&](topology::NodeId node) { return "@\"" + topo.node(node).id + "\""; };
  std::string pins;
  auto pin = [&](int from, int to) {
    const auto a = nic_of(topo, topo.gpu_of_rank(from));
    const auto b = nic_of(topo, topo.gpu_of_rank(to));
    if (!a || !b) return;
    const auto path = router.path(*a, *b, gpu_links);
    if (path.empty()) return;
    pins += "route " + std::to_string(from) + " -> " + std::to_string(to) + " via " + quoted(*a);
    for (topology::LinkId l : path)
      pins += " " + quoted(static_cast<topology::NodeId>(topo.link(l).dst));
    pins += "\n";
  };
  for (std::size_t h = 0; h < rank_at.size(); ++h)
    for (std::size_t l = 0; l < L; ++l) {
      if (bw[static_cast<std::size_t>(rank_at[h][l])] > 0.95 * *fastest) continue;
      const std::size_t next = (h + 1) % rank_at.size(),
                        prev = (h + rank_at.size() - 1) % rank_at.size();
      for (std::size_t peer : {prev, next}) {
        pin(rank_at[h][l], rank_at[peer][l]);
        pin(rank_at[peer][l], rank_at[h][l]);
      }
    }

  std::vector<std::string> out;
  for (const std::string intra : {"direct", "ring"})
    for (const std::string settings : {"channels 2\npipeline 16\n", "channels 1\npipeline 8\n"})
      out.push_back(settings + pins + "split {\n  weight (" + per_local(kept) +
                    ") {\n    ring over rails reverse\n    " + intra +
                    " over hosts\n  }\n  weight (" + per_local(handed) +
                    ") {\n    scatter over hosts\n    ring over rails reverse\n    " + intra +
                    " over hosts\n  }\n}\n");
  return out;
}

// One ring, or a split that gives each ring a weight proportional to its bandwidth.
std::string ring_program(const topology::RingSet& rings) {
  auto ring = [](const std::vector<int>& order) {
    std::string text = "ring over [";
    for (std::size_t i = 0; i < order.size(); ++i)
      text += (i ? ", " : "") + std::to_string(order[i]);
    return text + "]";
  };
  if (rings.size() == 1) return ring(rings.front().order) + "\n";
  std::string text = "split {\n";
  for (const auto& r : rings)
    text += "  weight " + std::to_string(std::lround(r.bw_GBps * 100)) + " {\n    " +
            ring(r.order) + "\n  }\n";
  return text + "}\n";
}

}  // namespace

std::vector<std::string> template_programs(const ProposalContext& context) {
  const topology::Topology& topo = *context.topology;
  const Shape s = shape_of(topo);
  std::vector<std::string> out = {
      "ring over all\n",
      "split {\n  weight 1 {\n    ring over all\n  }\n  weight 1 {\n    ring over all reverse\n  "
      "}\n}\n",
      "direct over all\n",
      "bruck over all\n",
      "binomial over all\n",
      "dbtree over all\n",
      "kary 4 over all\n",
      "bfs over all\n",
      "pipeline 4\nbfs over all\n",
      "pipeline 4\nsplit {\n  weight 0.5 {\n    bfs over all\n  }\n  weight 0.5 {\n    bfs over "
      "all reverse\n  }\n}\n",
  };
  if (power_of_two(s.ranks)) out.push_back("rd over all\n");
  // Ring sets along direct GPU links, as NCCL builds its rings.
  for (const auto& rings : topology::best_ring_sets(topo)) out.push_back(ring_program(rings));
  if (s.hosts > 1 && s.per_host > 1) {
    out.push_back("split nlocal as r {\n  ring over all by (host, (local - r) % nlocal)\n}\n");
    out.push_back(
        "pipeline 2\nsplit nlocal as r {\n  ring over all by (host, (local - r) % nlocal)\n}\n");
    for (auto& p : hierarchical(s)) out.push_back(std::move(p));
    const std::vector<double> bw = network_bandwidth(topo);
    for (auto& p : around_slow_links(bw, s)) out.push_back(std::move(p));
    for (auto& p : balanced_rails(topo, bw, s)) out.push_back(std::move(p));
  }
  // The throughput-optimal tree packing (topology/tree_packing.hpp), whole or across the rails.
  if (static_cast<std::size_t>(s.ranks) <= topology::kMaxPackingMembers) {
    out.push_back("pipeline 16\npack over all\n");
    out.push_back("pipeline 64\npack over all\n");
  }
  if (s.hosts > 1 && s.per_host > 1)
    out.push_back("channels 4\npipeline 8\npack over rails\ndirect over hosts\n");
  return out;
}

}  // namespace optiflow::propose
