#include "templates.hpp"

#include <algorithm>
#include <cmath>
#include <functional>
#include <map>

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
std::vector<std::string> around_slow_links(const topology::Topology& topo, const Shape& s) {
  const auto bw = network_bandwidth(topo);
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

// Rings along direct GPU-to-GPU links, found the way NCCL searches for its rings: repeatedly a
// directed Hamiltonian cycle over links with capacity left (depth-first from rank 0, fattest
// links first, a bounded search), worth the capacity of its thinnest link, which is then
// taken off every link it uses. Returns the cycles and their capacities.
using RingSet = std::vector<std::pair<std::vector<int>, double>>;

RingSet link_rings(const topology::Topology& topo, bool pair_reverse, std::uint64_t seed) {
  constexpr std::size_t kMaxRings = 12;
  constexpr std::size_t kMaxSteps = 200000;
  const int n = topo.rank_count();
  std::vector<std::vector<double>> left(static_cast<std::size_t>(n),
                                        std::vector<double>(static_cast<std::size_t>(n), 0));
  for (const topology::Link& l : topo.links())
    if (topo.node(l.src).kind == topology::NodeKind::gpu &&
        topo.node(l.dst).kind == topology::NodeKind::gpu)
      left[static_cast<std::size_t>(topo.node(l.src).rank)]
          [static_cast<std::size_t>(topo.node(l.dst).rank)] += l.bw_GBps;
  auto capacity = [&](int a, int b) {
    return left[static_cast<std::size_t>(a)][static_cast<std::size_t>(b)];
  };

  // Ties between equally fat links are broken by a seeded hash of (position, link): different
  // seeds find different cycles, and some leave room for more.
  auto tie = [seed](int at, int b, std::size_t depth) {
    std::uint64_t x = seed * 0x9e3779b97f4a7c15ULL ^ (static_cast<std::uint64_t>(at) << 32) ^
                      (static_cast<std::uint64_t>(b) << 16) ^ depth;
    x = (x ^ (x >> 30)) * 0xbf58476d1ce4e5b9ULL;
    x = (x ^ (x >> 27)) * 0x94d049bb133111ebULL;
    return x ^ (x >> 31);
  };
  RingSet rings;
  while (rings.size() < kMaxRings && n > 2) {
    std::vector<int> path{0};
    std::vector<char> used(static_cast<std::size_t>(n), 0);
    used[0] = 1;
    std::size_t steps = 0;
    std::function<bool()> extend = [&]() -> bool {
      if (++steps > kMaxSteps) return false;
      const int at = path.back();
      if (static_cast<int>(path.size()) == n) return capacity(at, 0) > 0;
      std::vector<int> next;
      for (int b = 0; b < n; ++b)
        if (!used[static_cast<std::size_t>(b)] && capacity(at, b) > 0) next.push_back(b);
      std::sort(next.begin(), next.end(), [&](int a, int b) {
        if (capacity(at, a) != capacity(at, b)) return capacity(at, a) > capacity(at, b);
        return seed == 0 ? a < b : tie(at, a, path.size()) < tie(at, b, path.size());
      });
      for (int b : next) {
        used[static_cast<std::size_t>(b)] = 1;
        path.push_back(b);
        if (extend()) return true;
        path.pop_back();
        used[static_cast<std::size_t>(b)] = 0;
      }
      return false;
    };
    if (!extend()) break;
    // The same cycle the other way round uses the links' other directions; taking both keeps
    // what is left symmetric, which leaves room for further cycles.
    std::vector<int> back{path.front()};
    back.insert(back.end(), path.rbegin(), path.rend() - 1);
    std::vector<std::vector<int>> cycles{path};
    if (pair_reverse) cycles.push_back(back);
    for (const auto& cycle : cycles) {
      double rate = 1e300;
      for (int i = 0; i < n; ++i)
        rate = std::min(rate, capacity(cycle[static_cast<std::size_t>(i)],
                                       cycle[static_cast<std::size_t>((i + 1) % n)]));
      if (rate <= 0) continue;
      for (int i = 0; i < n; ++i)
        left[static_cast<std::size_t>(cycle[static_cast<std::size_t>(i)])]
            [static_cast<std::size_t>(cycle[static_cast<std::size_t>((i + 1) % n)])] -= rate;
      rings.emplace_back(cycle, rate);
    }
  }
  return rings;
}

// The fattest ring sets of a few seeded searches, with and without pairing each ring with its
// reverse (at most two programs; none on topologies without direct GPU links).
std::vector<RingSet> best_ring_sets(const topology::Topology& topo) {
  const std::uint64_t seeds = topo.rank_count() <= 32
                                  ? 64
                                  : 8;  // the search is bounded; small topologies afford more tries
  std::vector<RingSet> best;
  for (bool pair_reverse : {false, true}) {
    RingSet chosen;
    double chosen_rate = 0;
    for (std::uint64_t seed = 0; seed < seeds; ++seed) {
      RingSet rings = link_rings(topo, pair_reverse, seed);
      double rate = 0;
      for (const auto& ring : rings) rate += ring.second;
      if (rate > chosen_rate) {
        chosen_rate = rate;
        chosen = std::move(rings);
      }
    }
    if (!chosen.empty() && (best.empty() || best.front() != chosen))
      best.push_back(std::move(chosen));
  }
  return best;
}

std::string ring_program(const std::vector<std::pair<std::vector<int>, double>>& rings) {
  auto ring = [](const std::vector<int>& order) {
    std::string text = "ring over [";
    for (std::size_t i = 0; i < order.size(); ++i)
      text += (i ? ", " : "") + std::to_string(order[i]);
    return text + "]";
  };
  if (rings.size() == 1) return ring(rings.front().first) + "\n";
  std::string text = "split {\n";
  for (const auto& [order, rate] : rings)
    text += "  weight " + std::to_string(std::lround(rate * 100)) + " {\n    " + ring(order) +
            "\n  }\n";
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
  for (const auto& rings : best_ring_sets(topo)) out.push_back(ring_program(rings));
  if (s.hosts > 1 && s.per_host > 1) {
    out.push_back("split nlocal as r {\n  ring over all by (host, (local - r) % nlocal)\n}\n");
    out.push_back(
        "pipeline 2\nsplit nlocal as r {\n  ring over all by (host, (local - r) % nlocal)\n}\n");
    for (auto& p : hierarchical(s)) out.push_back(std::move(p));
    for (auto& p : around_slow_links(topo, s)) out.push_back(std::move(p));
  }
  return out;
}

}  // namespace optiflow::propose
