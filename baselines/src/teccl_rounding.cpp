// The TE-CCL baseline's integer schedules from flows: the LP-guided greedy that rounds the
// relaxation (and bounds the epoch search from above), and the trace from arrivals back to
// GPU-to-GPU transfers (TE-CCL's dfs_remove_unnecessary_flows).
#include <algorithm>
#include <cmath>
#include <tuple>

#include "optiflow/support/error.hpp"
#include "teccl_model.hpp"

namespace optiflow::baselines::teccl {
namespace {

constexpr int kMaxPathArcs = 8;
constexpr std::size_t kMaxPathsPerPair = 4;

std::size_t at(int i) {
  return static_cast<std::size_t>(i);
}

// A way from one GPU to another through switches only, as arcs.
struct Path {
  std::vector<int> arcs;
  int delay = 0;
  topology::NodeId to = 0;
};

void extend(const Fabric& fabric, topology::NodeId node, std::vector<int>& arcs,
            std::vector<bool>& visited, int delay, std::vector<Path>& out) {
  for (int a : fabric.out_arcs[node]) {
    const Arc& arc = fabric.arcs[at(a)];
    if (visited[arc.to]) continue;
    arcs.push_back(a);
    if (fabric.is_gpu[arc.to]) {
      out.push_back({arcs, delay + arc.delay, arc.to});
    } else if (static_cast<int>(arcs.size()) < kMaxPathArcs) {
      visited[arc.to] = true;
      extend(fabric, arc.to, arcs, visited, delay + arc.delay, out);
      visited[arc.to] = false;
    }
    arcs.pop_back();
  }
}

// Per GPU rank: its paths to every other GPU, the few fastest per receiver, fastest first;
// none slower than relaying through GPUs would be (a detour over a spine then only takes
// link time away from the paths that need it).
std::vector<std::vector<Path>> all_paths(const Fabric& fabric) {
  std::vector<std::vector<Path>> paths(at(fabric.ranks));
  for (int r = 0; r < fabric.ranks; ++r) {
    const topology::NodeId from = fabric.node_of_rank[at(r)];
    std::vector<Path> found;
    std::vector<int> arcs;
    std::vector<bool> visited(fabric.is_gpu.size(), false);
    visited[from] = true;
    extend(fabric, from, arcs, visited, 0, found);
    std::stable_sort(found.begin(), found.end(), [](const Path& a, const Path& b) {
      return std::tie(a.to, a.delay) < std::tie(b.to, b.delay);
    });
    for (std::size_t i = 0; i < found.size();) {
      std::size_t j = i;
      while (j < found.size() && found[j].to == found[i].to) ++j;
      for (std::size_t k = i; k < std::min(j, i + kMaxPathsPerPair); ++k)
        if (found[k].delay <= fabric.reach[from][found[k].to]) paths[at(r)].push_back(found[k]);
      i = j;
    }
  }
  return paths;
}

// Whether one more chunk fits on `arc` in epoch t: every beta + 1 window holding t stays within
// (beta + 1) x chunks_per_epoch whole chunks.
bool fits(const State& state, const Arc& arc, int a, int t) {
  const int limit = static_cast<int>(std::floor((arc.beta + 1) * arc.chunks_per_epoch + 1e-9));
  for (int end = t; end <= t + arc.beta; ++end) {
    int used = 1;
    for (int e = end - arc.beta; e <= end; ++e) used += state.load(a, e);
    if (used > limit) return false;
  }
  return true;
}

struct Candidate {
  double guided = 0;
  int delay = 0;
  int q = 0, sender = 0;
  const Path* path = nullptr;
  auto key() const { return std::make_tuple(-guided, delay, q, sender, path->to); }
};

// Whether a GPU that is yet to receive the chunk could pass it on to the candidate's receiver
// as soon as the candidate would deliver it: then the candidate would spend links (a node's
// NICs, the scarce ones) on a second copy for nothing.
bool relayed_as_soon(const State& state, const Candidate& c, int t) {
  const Fabric& fabric = state.fabric();
  const topology::NodeId sender = fabric.node_of_rank[at(c.sender)];
  for (topology::NodeId h : fabric.node_of_rank) {
    const int arrival = state.arrival(c.q, h);
    if (h == sender || arrival <= t || arrival == kNever) continue;
    if (arrival + fabric.reach[h][c.path->to] <= t + c.path->delay) return true;
  }
  return false;
}

}  // namespace

void round_greedily(State& state, int first_epoch, const Guide& guide, int stop_epoch) {
  const Fabric& fabric = state.fabric();
  const std::vector<std::vector<Path>> paths = all_paths(fabric);
  const int limit_epoch =
      first_epoch + 4 * (fabric.commodities() * fabric.ranks + 8) * (fabric.max_delay + 1);
  std::vector<std::tuple<int, int, int>> used;  // (q, arc, epoch) flows added so far
  for (const Flow& f : state.flows()) used.emplace_back(f.q, f.arc, f.epoch);
  std::sort(used.begin(), used.end());
  const auto has = [&](int q, int a, int t) {
    return std::binary_search(used.begin(), used.end(), std::make_tuple(q, a, t));
  };
  for (int t = first_epoch; t < stop_epoch && state.missing() > 0; ++t) {
    if (t > limit_epoch)
      throw support::InputError(support::SourceLocation{"teccl", 0, 0, {}},
                                "teccl: the rounding found no way to deliver every chunk");
    std::vector<Candidate> candidates;
    for (int q = 0; q < fabric.commodities(); ++q)
      for (int r = 0; r < fabric.ranks; ++r) {
        const topology::NodeId sender = fabric.node_of_rank[at(r)];
        if (state.arrival(q, sender) > t) continue;
        for (const Path& path : paths[at(r)]) {
          if (state.arrival(q, path.to) != kNever) continue;
          Candidate c{0, path.delay, q, r, &path};
          int when = t;
          for (int a : path.arcs) {
            if (const auto it = guide.find(Flow{q, a, when}); it != guide.end())
              c.guided += it->second;
            when += fabric.arcs[at(a)].delay;
          }
          candidates.push_back(c);
        }
      }
    std::sort(candidates.begin(), candidates.end(),
              [](const Candidate& a, const Candidate& b) { return a.key() < b.key(); });
    for (const Candidate& c : candidates) {
      if (state.arrival(c.q, c.path->to) != kNever) continue;
      if (relayed_as_soon(state, c, t)) continue;
      bool room = true;
      int when = t;
      for (int a : c.path->arcs) {
        const Arc& arc = fabric.arcs[at(a)];
        if (!has(c.q, a, when) && !fits(state, arc, a, when)) room = false;
        when += arc.delay;
      }
      if (!room) continue;
      when = t;
      for (int a : c.path->arcs) {
        if (!has(c.q, a, when)) {
          state.add(Flow{c.q, a, when});
          used.insert(std::upper_bound(used.begin(), used.end(), std::make_tuple(c.q, a, when)),
                      std::make_tuple(c.q, a, when));
        }
        when += fabric.arcs[at(a)].delay;
      }
    }
  }
}

std::vector<schedule::EpochTransfer> transfers_of(const State& state) {
  const Fabric& fabric = state.fabric();
  // (q, node, epoch it lands) -> the flows landing there, lowest arc first.
  std::map<std::tuple<int, topology::NodeId, int>, std::vector<const Flow*>> landing;
  for (const Flow& f : state.flows()) {
    const Arc& arc = fabric.arcs[at(f.arc)];
    landing[{f.q, arc.to, f.epoch + arc.delay}].push_back(&f);
  }
  for (auto& [key, flows] : landing)
    std::sort(flows.begin(), flows.end(), [](const Flow* a, const Flow* b) {
      return std::tie(a->arc, a->epoch) < std::tie(b->arc, b->epoch);
    });
  const auto lost = [](const std::string& what) {
    return support::InputError(support::SourceLocation{"teccl", 0, 0, {}},
                               "teccl: internal: " + what);
  };
  std::vector<schedule::EpochTransfer> transfers;
  for (int q = 0; q < fabric.commodities(); ++q)
    for (int r = 0; r < fabric.ranks; ++r) {
      const topology::NodeId gpu = fabric.node_of_rank[at(r)];
      if (gpu == fabric.source_node(q)) continue;
      const int arrival = state.arrival(q, gpu);
      if (arrival == kNever) throw lost("a chunk never arrives");
      std::vector<const Flow*> chain;
      topology::NodeId node = gpu;
      int when = arrival;
      do {
        const auto it = landing.find({q, node, when});
        if (it == landing.end()) throw lost("a switch forwards a chunk it never received");
        chain.push_back(it->second.front());
        node = fabric.arcs[at(chain.back()->arc)].from;
        when = chain.back()->epoch;
      } while (!fabric.is_gpu[node]);
      std::reverse(chain.begin(), chain.end());
      schedule::EpochTransfer t;
      t.sender = -1;
      for (int s = 0; s < fabric.ranks; ++s)
        if (fabric.node_of_rank[at(s)] == node) t.sender = s;
      t.receiver = r;
      t.chunk = q;
      t.epoch = chain.front()->epoch;
      for (const Flow* f : chain) t.route.push_back(fabric.arcs[at(f->arc)].link);
      transfers.push_back(std::move(t));
    }
  std::stable_sort(transfers.begin(), transfers.end(),
                   [](const schedule::EpochTransfer& a, const schedule::EpochTransfer& b) {
                     return a.epoch < b.epoch;
                   });
  return transfers;
}

}  // namespace optiflow::baselines::teccl
