#include "optiflow/topology/rings.hpp"

#include <algorithm>
#include <cstddef>
#include <optional>

namespace optiflow::topology {
namespace {

constexpr std::size_t kMaxRings = 12;
// Depth-first steps per cycle: the search is exponential in the worst case, so it gives up.
constexpr std::size_t kMaxSearchSteps = 200000;

// Bandwidth left on the direct links from one rank to another.
class LinkCapacity {
 public:
  explicit LinkCapacity(const Topology& topology)
      : ranks_(topology.rank_count()), left_(cell(ranks_, 0), 0) {
    for (const Link& l : topology.links()) {
      const Node &src = topology.node(l.src), &dst = topology.node(l.dst);
      if (src.kind == NodeKind::gpu && dst.kind == NodeKind::gpu)
        left_[cell(src.rank, dst.rank)] += l.bw_GBps;
    }
  }

  int ranks() const { return ranks_; }
  double operator()(int from, int to) const { return left_[cell(from, to)]; }

  // What a ring can be given: the bandwidth left on its thinnest link.
  double bottleneck(const std::vector<int>& order) const {
    double bw = (*this)(order.back(), order.front());
    for (std::size_t i = 0; i + 1 < order.size(); ++i)
      bw = std::min(bw, (*this)(order[i], order[i + 1]));
    return bw;
  }

  void take(const Ring& ring) {
    const std::vector<int>& order = ring.order;
    for (std::size_t i = 0; i < order.size(); ++i)
      left_[cell(order[i], order[(i + 1) % order.size()])] -= ring.bw_GBps;
  }

 private:
  std::size_t cell(int from, int to) const {
    return static_cast<std::size_t>(from) * static_cast<std::size_t>(ranks_) +
           static_cast<std::size_t>(to);
  }

  int ranks_;
  std::vector<double> left_;
};

// Ties between equally fat links are broken by a seeded hash of (rank, next rank, depth):
// different seeds find different cycles, and some leave room for more (splitmix64's mixer).
std::uint64_t tie_key(std::uint64_t seed, int at, int next, std::size_t depth) {
  std::uint64_t x = seed * 0x9e3779b97f4a7c15ULL ^ (static_cast<std::uint64_t>(at) << 32) ^
                    (static_cast<std::uint64_t>(next) << 16) ^ depth;
  x = (x ^ (x >> 30)) * 0xbf58476d1ce4e5b9ULL;
  x = (x ^ (x >> 27)) * 0x94d049bb133111ebULL;
  return x ^ (x >> 31);
}

// A depth-first search for a directed Hamiltonian cycle from rank 0 over links with bandwidth
// left, trying the fattest links first and giving up after kMaxSearchSteps steps.
class CycleSearch {
 public:
  CycleSearch(const LinkCapacity& capacity, std::uint64_t seed)
      : capacity_(capacity), seed_(seed), used_(static_cast<std::size_t>(capacity.ranks()), 0) {}

  std::optional<std::vector<int>> run() {
    path_ = {0};
    used_[0] = 1;
    if (!extend()) return std::nullopt;
    return path_;
  }

 private:
  bool extend() {
    if (++steps_ > kMaxSearchSteps) return false;
    const int at = path_.back();
    if (static_cast<int>(path_.size()) == capacity_.ranks()) return capacity_(at, 0) > 0;
    for (int next : candidates(at)) {
      used_[static_cast<std::size_t>(next)] = 1;
      path_.push_back(next);
      if (extend()) return true;
      path_.pop_back();
      used_[static_cast<std::size_t>(next)] = 0;
    }
    return false;
  }

  // The unvisited ranks `at` has bandwidth left to, fattest first.
  std::vector<int> candidates(int at) const {
    std::vector<int> next;
    for (int b = 0; b < capacity_.ranks(); ++b)
      if (!used_[static_cast<std::size_t>(b)] && capacity_(at, b) > 0) next.push_back(b);
    const std::size_t depth = path_.size();
    std::sort(next.begin(), next.end(), [&](int a, int b) {
      if (capacity_(at, a) != capacity_(at, b)) return capacity_(at, a) > capacity_(at, b);
      return seed_ == 0 ? a < b : tie_key(seed_, at, a, depth) < tie_key(seed_, at, b, depth);
    });
    return next;
  }

  const LinkCapacity& capacity_;
  std::uint64_t seed_;
  std::vector<char> used_;
  std::vector<int> path_;
  std::size_t steps_ = 0;
};

// The same cycle the other way round, still starting at its first rank.
std::vector<int> reversed(const std::vector<int>& order) {
  std::vector<int> back{order.front()};
  back.insert(back.end(), order.rbegin(), order.rend() - 1);
  return back;
}

}  // namespace

RingSet link_rings(const Topology& topology, const RingSearch& search) {
  LinkCapacity capacity(topology);
  RingSet rings;
  while (rings.size() < kMaxRings && capacity.ranks() > 2) {
    const auto cycle = CycleSearch(capacity, search.seed).run();
    if (!cycle) break;
    std::vector<std::vector<int>> orders{*cycle};
    if (search.pair_reverse) orders.push_back(reversed(*cycle));
    for (auto& order : orders) {
      const double bw = capacity.bottleneck(order);
      if (bw <= 0) continue;
      rings.push_back(Ring{std::move(order), bw});
      capacity.take(rings.back());
    }
  }
  return rings;
}

double total_bw_GBps(const RingSet& rings) {
  double total = 0;
  for (const Ring& ring : rings) total += ring.bw_GBps;
  return total;
}

std::vector<RingSet> best_ring_sets(const Topology& topology) {
  // The search is bounded, so small topologies afford more tries.
  const std::uint64_t seeds = topology.rank_count() <= 32 ? 64 : 8;
  std::vector<RingSet> best;
  for (bool pair_reverse : {false, true}) {
    RingSet chosen;
    for (std::uint64_t seed = 0; seed < seeds; ++seed) {
      RingSet rings = link_rings(topology, RingSearch{pair_reverse, seed});
      if (total_bw_GBps(rings) > total_bw_GBps(chosen)) chosen = std::move(rings);
    }
    if (!chosen.empty() && (best.empty() || best.front() != chosen))
      best.push_back(std::move(chosen));
  }
  return best;
}

}  // namespace optiflow::topology
