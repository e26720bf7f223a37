// TACCL's ordering stage (taccl/heuristic_ordering.py, HeuristicOrderer): a greedy list
// scheduler over the routed paths fixes the order of the chunks on every link and every switch,
// which the scheduling MILP then keeps.
//
// Paths (owner to each leaf of a chunk's tree) are taken longest first; each round places the
// candidate segment that TACCL's heuristic ranks first at the earliest time its path and its
// link (and the switch links it shares time with) allow. Heuristic 10 (switch sketches) ranks by
// the time still to travel, heuristic 14 (several nodes) by the earliest start and then own-node
// chunks first; TACCL's heuristic 5 (one node, no switch), which places segments backwards from
// the end, is replaced here by heuristic 10's forward placement.
#include <algorithm>
#include <map>
#include <tuple>

#include "taccl_internal.hpp"

namespace optiflow::baselines::taccl {
namespace {

struct Path {
  int chunk = 0;
  std::vector<int> links;  // owner first
  double total = 0;
};

std::vector<Path> chunk_paths(const LogicalTopology& logical, const ChunkSpace& space,
                              const Routing& routing) {
  std::vector<Path> paths;
  const auto ranks = static_cast<std::size_t>(logical.ranks);
  for (int c = 0; c < space.chunks(); ++c) {
    const auto& sent = routing.sent[static_cast<std::size_t>(c)];
    std::vector<int> into(ranks, -1);
    std::vector<char> forwards(ranks, 0);
    for (std::size_t e = 0; e < sent.size(); ++e)
      if (sent[e]) {
        into[static_cast<std::size_t>(logical.links[e].dst)] = static_cast<int>(e);
        forwards[static_cast<std::size_t>(logical.links[e].src)] = 1;
      }
    for (int leaf = 0; leaf < logical.ranks; ++leaf) {
      if (forwards[static_cast<std::size_t>(leaf)] || into[static_cast<std::size_t>(leaf)] < 0)
        continue;
      Path p;
      p.chunk = c;
      for (int r = leaf; r != space.owner(c);) {
        const int e = into[static_cast<std::size_t>(r)];
        p.links.push_back(e);
        p.total += logical.links[static_cast<std::size_t>(e)].cost;
        r = logical.links[static_cast<std::size_t>(e)].src;
      }
      std::reverse(p.links.begin(), p.links.end());
      paths.push_back(std::move(p));
    }
  }
  // Longest total time first (sorted() in TACCL is stable, as here).
  std::stable_sort(paths.begin(), paths.end(),
                   [](const Path& a, const Path& b) { return a.total > b.total; });
  return paths;
}

class Orderer {
 public:
  Orderer(const LogicalTopology& logical, const ChunkSpace& space, const Routing& routing,
          int heuristic)
      : logical_(logical),
        space_(space),
        routing_(routing),
        heuristic_(heuristic),
        paths_(chunk_paths(logical, space, routing)) {
    for (const Path& p : paths_) {
      double rest = 0;
      for (auto it = p.links.rbegin(); it != p.links.rend(); ++it) {
        rest += logical.links[static_cast<std::size_t>(*it)].cost;
        double& t = to_travel_[{p.chunk, *it}];
        t = std::max(t, rest);
      }
    }
    const auto links = logical.links.size();
    out_switches_.resize(static_cast<std::size_t>(logical.ranks));
    in_switches_.resize(static_cast<std::size_t>(logical.ranks));
    on_out_switch_.assign(links, 0);
    for (std::size_t h = 0; h < logical.switches.size(); ++h) {
      const Hyperedge& edge = logical.switches[h];
      (edge.out ? out_switches_ : in_switches_)[static_cast<std::size_t>(edge.gpu)].push_back(h);
      if (edge.out)
        for (int e : edge.links) on_out_switch_[static_cast<std::size_t>(e)] = 1;
    }
  }

  // The greedy placement: pos_[{chunk, link}] = when the segment starts.
  void place() {
    const std::size_t count = paths_.size();
    std::vector<double> path_time(count, 0.0);
    std::vector<std::size_t> next(count, 0);
    std::vector<double> link_time(logical_.links.size(), 0.0);
    std::vector<std::size_t> live(count);
    for (std::size_t p = 0; p < count; ++p) live[p] = p;
    while (!live.empty()) {
      std::size_t best = live.front();
      auto best_key = key(best, path_time, link_time, next);
      for (std::size_t p : live)
        if (auto k = key(p, path_time, link_time, next); k < best_key) {
          best_key = k;
          best = p;
        }
      const int c = paths_[best].chunk;
      const int e = paths_[best].links[next[best]];
      const LogicalLink& link = logical_.links[static_cast<std::size_t>(e)];
      const double start = std::max(path_time[best], link_time[static_cast<std::size_t>(e)]);
      const double end = start + link.cost;
      pos_[{c, e}] = start;
      // TACCL: a segment on a switch link holds every switch link into its receiver and out of
      // its sender until it ends.
      if (on_out_switch_[static_cast<std::size_t>(e)]) {
        for (std::size_t h : in_switches_[static_cast<std::size_t>(link.dst)])
          for (int other : logical_.switches[h].links)
            link_time[static_cast<std::size_t>(other)] = end;
        for (std::size_t h : out_switches_[static_cast<std::size_t>(link.src)])
          for (int other : logical_.switches[h].links)
            link_time[static_cast<std::size_t>(other)] = end;
      }
      link_time[static_cast<std::size_t>(e)] = end;
      // Every path of this chunk through this link has now crossed it.
      std::vector<std::size_t> still;
      for (std::size_t p : live) {
        if (paths_[p].chunk == c && paths_[p].links[next[p]] == e) {
          path_time[p] = end;
          if (++next[p] == paths_[p].links.size()) continue;
        }
        still.push_back(p);
      }
      live = std::move(still);
    }
  }

  Ordering result() const {
    Ordering ordering;
    ordering.heuristic = heuristic_;
    const int chunks = space_.chunks();
    ordering.on_link.resize(logical_.links.size());
    for (std::size_t e = 0; e < logical_.links.size(); ++e) {
      std::vector<int>& order = ordering.on_link[e];
      for (int c = 0; c < chunks; ++c)
        if (routing_.sent[static_cast<std::size_t>(c)][e]) order.push_back(c);
      std::stable_sort(order.begin(), order.end(), [&](int a, int b) {
        return order_key(a, static_cast<int>(e)) < order_key(b, static_cast<int>(e));
      });
    }
    for (const Hyperedge& h : logical_.switches) {
      std::vector<std::pair<int, int>> order;
      for (int e : h.links)
        for (int c = 0; c < chunks; ++c)
          if (routing_.sent[static_cast<std::size_t>(c)][static_cast<std::size_t>(e)])
            order.emplace_back(c, e);
      const int r = logical_.ranks;
      std::stable_sort(order.begin(), order.end(), [&](const auto& a, const auto& b) {
        auto peer = [&](int e) {
          const LogicalLink& l = logical_.links[static_cast<std::size_t>(e)];
          return h.out ? (h.gpu - l.dst + r) % r : (l.src - h.gpu + r) % r;
        };
        return std::tuple_cat(order_key(a.first, a.second), std::make_tuple(peer(a.second))) <
               std::tuple_cat(order_key(b.first, b.second), std::make_tuple(peer(b.second)));
      });
      ordering.on_switch.push_back(std::move(order));
    }
    return ordering;
  }

 private:
  // Heuristic 14 orders by the greedy's times alone; the others by the routing's (integer) send
  // times first, the greedy's breaking ties (perform_ordering).
  std::tuple<long long, double, int> order_key(int c, int e) const {
    const double pos = pos_.at({c, e});
    if (heuristic_ == 14) return {0, pos, c};
    const double t = routing_.send_time[static_cast<std::size_t>(c)][static_cast<std::size_t>(e)];
    return {static_cast<long long>(t + 0.005), pos, c};
  }

  int own_node_chunk(int c, const LogicalLink& l) const {
    const int home = logical_.node_of(space_.owner(c));
    return logical_.node_of(l.src) == logical_.node_of(l.dst) && logical_.node_of(l.src) == home
               ? 0
               : 1;
  }

  using Key = std::tuple<double, double, double, int, int, int, int, std::size_t>;
  Key key(std::size_t p, const std::vector<double>& path_time, const std::vector<double>& link_time,
          const std::vector<std::size_t>& next) const {
    const Path& path = paths_[p];
    const int e = path.links[next[p]];
    const LogicalLink& l = logical_.links[static_cast<std::size_t>(e)];
    const double when = std::max(path_time[p], link_time[static_cast<std::size_t>(e)]);
    const double travel = -to_travel_.at({path.chunk, e});
    const int r = logical_.ranks, n = logical_.per_node;
    const int spread = (l.src - l.dst + r) % r;
    if (heuristic_ == 14)
      return {when, own_node_chunk(path.chunk, l), travel, spread, l.dst % n, l.src % n, l.dst / n,
              p};
    return {travel, when, 0, spread, l.dst % n, l.src % n, l.dst / n, p};
  }

  const LogicalTopology& logical_;
  const ChunkSpace& space_;
  const Routing& routing_;
  int heuristic_;
  std::vector<Path> paths_;
  std::map<std::pair<int, int>, double> to_travel_;
  std::map<std::pair<int, int>, double> pos_;
  std::vector<std::vector<std::size_t>> out_switches_, in_switches_;
  std::vector<char> on_out_switch_;
};

}  // namespace

Ordering order_transfers(const LogicalTopology& logical, const TacclSketch& sketch,
                         const ChunkSpace& space, const Routing& routing) {
  // parse_and_get_topo's choice of heuristic.
  int heuristic = 5;
  if (!sketch.switches.empty() && sketch.intra == TacclIntraStrategy::switch_)
    heuristic = 10;
  else if (sketch.nnodes > 1)
    heuristic = 14;
  Orderer orderer(logical, space, routing, heuristic);
  orderer.place();
  return orderer.result();
}

}  // namespace optiflow::baselines::taccl
