#include "templates.hpp"

#include <algorithm>
#include <cmath>
#include <limits>
#include <map>
#include <optional>

#include "optiflow/topology/rail_balance.hpp"
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

// `var == 3 ? k3 : var == 11 ? k11 : k`, k the most common value (the lowest of a tie): per-rail
// or per-GPU weights.
std::string cases(const char* var, const std::vector<long>& values) {
  std::map<long, int> count;
  for (long v : values) ++count[v];
  const long common =
      std::max_element(count.begin(), count.end(), [](const auto& a, const auto& b) {
        return a.second < b.second;
      })->first;
  std::string text;
  for (std::size_t i = 0; i < values.size(); ++i)
    if (values[i] != common)
      text +=
          std::string(var) + " == " + std::to_string(i) + " ? " + std::to_string(values[i]) + " : ";
  return text + std::to_string(common);
}

// Weights k / D for the kept part and (D - k) / D for the scattered one, by rank or, where
// every host's GPU l keeps the same, by `local`: `split { weight (kept) {...} weight (handed)
// {...} }`.
struct KeepWeights {
  std::string kept, handed;
};

KeepWeights keep_weights(const topology::RoundedKeeps& keeps,
                         const std::vector<std::vector<int>>& rank_at) {
  const std::size_t L = rank_at.front().size();
  const auto part = [&](int rank) { return keeps.parts[static_cast<std::size_t>(rank)]; };
  const bool per_rail = std::all_of(rank_at.begin(), rank_at.end(), [&](const auto& host) {
    for (std::size_t l = 0; l < L; ++l)
      if (part(host[l]) != part(rank_at.front()[l])) return false;
    return true;
  });
  std::vector<long> kept;
  if (per_rail)
    for (int rank : rank_at.front()) kept.push_back(part(rank));
  else
    kept.assign(keeps.parts.begin(), keeps.parts.end());
  std::vector<long> handed(kept.size());
  for (std::size_t i = 0; i < kept.size(); ++i) handed[i] = keeps.denominator - kept[i];
  const char* var = per_rail ? "local" : "rank";
  return {cases(var, kept), cases(var, handed)};
}

// Both ring neighbours of every GPU whose NIC is slower than `fast`, pinned to their rail's own
// NICs: the router would send a slow NIC's traffic around it through a peer GPU, onto another
// rail.
std::string rail_pins(const topology::Topology& topo, const std::vector<double>& bw,
                      const std::vector<std::vector<int>>& rank_at, double fast) {
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
  const std::size_t hosts = rank_at.size();
  for (std::size_t h = 0; h < hosts; ++h)
    for (std::size_t l = 0; l < rank_at[h].size(); ++l) {
      if (bw[static_cast<std::size_t>(rank_at[h][l])] > 0.95 * fast) continue;
      for (std::size_t peer : {(h + hosts - 1) % hosts, (h + 1) % hosts}) {
        pin(rank_at[h][l], rank_at[peer][l]);
        pin(rank_at[peer][l], rank_at[h][l]);
      }
    }
  return pins;
}

// Each GPU keeps `keep` of its share for its rail and scatters the rest to its host's peers;
// rings along the rails, then direct or ring inside hosts. A deep pipeline cuts each weight's
// parts finer, so its keeps are written with fewer parts (the chunks stay within the compiler's
// limit) and the shallow one's exactly.
void add_rail_programs(std::vector<std::string>& out, const topology::Topology& topo,
                       const std::vector<std::vector<int>>& rank_at, const std::string& pins,
                       const std::vector<double>& keep) {
  constexpr int kDeepPipelineDenominator = 8;
  for (const std::string intra : {"direct", "ring"})
    for (const auto& [settings, most_parts] :
         {std::pair{"channels 2\npipeline 16\n", kDeepPipelineDenominator},
          std::pair{"channels 1\npipeline 8\n", topology::kMaxKeepDenominator}}) {
      const KeepWeights weights =
          keep_weights(topology::round_keeps(topo, keep, most_parts), rank_at);
      std::string program = settings + pins + "split {\n  weight (" + weights.kept +
                            ") {\n    ring over rails reverse\n    " + intra +
                            " over hosts\n  }\n  weight (" + weights.handed +
                            ") {\n    scatter over hosts\n    ring over rails reverse\n    " +
                            intra + " over hosts\n  }\n}\n";
      if (std::find(out.begin(), out.end(), program) == out.end())
        out.push_back(std::move(program));
    }
}

// Rails of unequal bandwidth (a slow NIC slows its whole rail), two ways.
//
// Per rail, in closed form: each rail carries data in proportion to its bandwidth c_l, its
// slowest NIC's. GPU l keeps w_l of its share on its own rail and scatters the rest evenly
// over its host's other GPUs, which send it on their rails. Rail l then carries
// a_l = w_l + (S - (1 - w_l)) / (L - 1) shares per host, S the scattered total; with
// a_l = L c_l / sum(c) that gives w_l = (a_l (L - 1) - S + 1) / L, and the least scattering
// that keeps every w_l <= 1 is S = (max a - 1)(L - 1).
//
// Per GPU, from the network as it is (topology/rail_balance.hpp): a linear program over rails
// and hosts that sees each NIC, not only each rail's slowest, and that a ring does not carry a
// NIC's own host's data into it; where it is faster than keeping every share on its rail.
std::vector<std::string> balanced_rails(const topology::Topology& topo,
                                        const std::vector<double>& bw) {
  const std::vector<std::vector<int>> rank_at = topology::rank_grid(topo);
  if (bw.empty() || rank_at.empty()) return {};
  const std::size_t L = rank_at.front().size();
  std::vector<double> rail(L, std::numeric_limits<double>::infinity());
  for (const auto& host : rank_at)
    for (std::size_t l = 0; l < L; ++l)
      rail[l] = std::min(rail[l], bw[static_cast<std::size_t>(host[l])]);
  const auto [slowest, fastest] = std::minmax_element(rail.begin(), rail.end());
  const std::string pins = rail_pins(topo, bw, rank_at, *std::max_element(bw.begin(), bw.end()));
  std::vector<std::string> out;
  if (*slowest <= 0.95 * *fastest) {
    double total = 0;
    for (double c : rail) total += c;
    const double n = static_cast<double>(L);
    const double scattered = (n * *fastest / total - 1) * (n - 1);
    std::vector<double> keep(bw.size());
    for (const auto& host : rank_at)
      for (std::size_t l = 0; l < L; ++l)
        keep[static_cast<std::size_t>(host[l])] =
            std::clamp((n * rail[l] / total * (n - 1) - scattered + 1) / n, 0.0, 1.0);
    add_rail_programs(out, topo, rank_at, pins, keep);
  }
  const auto balance = topology::balance_rails(topo);
  if (balance && balance->time < 0.97 * balance->even_time)
    add_rail_programs(out, topo, rank_at, pins, balance->keep);
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
    const std::vector<double> bw = topology::nic_port_GBps(topo);
    for (auto& p : around_slow_links(bw, s)) out.push_back(std::move(p));
    for (auto& p : balanced_rails(topo, bw)) out.push_back(std::move(p));
  }
  // The throughput-optimal tree packing (topology/tree_packing.hpp), whole or across the rails.
  if (static_cast<std::size_t>(s.ranks) <= topology::kMaxPackingMembers) {
    out.push_back("pipeline 16\npack over all\n");
    out.push_back("pipeline 64\npack over all\n");
    // Deeper slices let the trees that share a FIFO link interleave finely enough to reach
    // their rates: on a 4:1 oversubscribed fat tree 1 GiB runs 1.085x the bound at 64 and
    // 1.022x at 256. Where the pieces times 256 exceed the chunk limit the compiler refuses it.
    out.push_back("pipeline 256\npack over all\n");
  }
  if (s.hosts > 1 && s.per_host > 1)
    out.push_back("channels 4\npipeline 8\npack over rails\ndirect over hosts\n");
  return out;
}

}  // namespace optiflow::propose
