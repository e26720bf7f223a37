#include "optiflow/topology/tree_packing.hpp"

#include <ClpSimplex.hpp>
#include <algorithm>
#include <cmath>
#include <deque>
#include <limits>
#include <map>
#include <mutex>
#include <numeric>
#include <optional>
#include <queue>
#include <tuple>

#include "optiflow/support/error.hpp"
#include "optiflow/topology/routing.hpp"

namespace optiflow::topology {
namespace {

constexpr double kInf = std::numeric_limits<double>::infinity();
constexpr double kHopCost = 1e-9;     // among routes of equal price, the one with fewer hops
constexpr double kTolerance = 1e-9;   // shares below this (of the rate) are dropped
// A column must improve the LP by more than this (relative): CLP's simplex takes no column
// whose reduced cost is within its dual tolerance (1e-7), and would be offered it again.
constexpr double kImprovement = 1e-6;
constexpr int kMaxIterations = 2000;  // per phase
constexpr double kRateSlack = 1e-9;   // phase 2 may give up this much of the best rate
constexpr int kMaxMoves = 100000;     // parts moved between trees after rounding
// Phase 2: an arc costs this x its sender's distance from the root, besides its route. From
// 0.1 to 1 every suite topology gets trees two deep (dgx1, without switches, three to five).
constexpr double kDepthWeight = 0.3;

[[noreturn]] void fail(const std::string& message) {
  throw support::InputError(support::SourceLocation{"pack", 0, 0, {}}, message);
}

struct Arc {
  int from = 0, to = 0;
  double cost = 0;
};

// Chu-Liu/Edmonds: the indices (into `arcs`) of a minimum-cost arborescence of `n` nodes
// rooted at `root`, one arc into every other node; empty when some node cannot be reached.
// Ties go to the lower arc index, so the result is deterministic.
std::vector<int> min_arborescence(int n, int root, const std::vector<Arc>& arcs) {
  std::vector<int> best_in(static_cast<std::size_t>(n), -1);
  for (int i = 0; i < static_cast<int>(arcs.size()); ++i) {
    const Arc& a = arcs[static_cast<std::size_t>(i)];
    if (a.to == root || a.from == a.to) continue;
    int& best = best_in[static_cast<std::size_t>(a.to)];
    if (best < 0 || a.cost < arcs[static_cast<std::size_t>(best)].cost) best = i;
  }
  for (int v = 0; v < n; ++v)
    if (v != root && best_in[static_cast<std::size_t>(v)] < 0) return {};
  auto parent = [&](int v) {
    return arcs[static_cast<std::size_t>(best_in[static_cast<std::size_t>(v)])].from;
  };

  // The cycles the cheapest in-arcs close; every other node is a component of its own.
  std::vector<int> component(static_cast<std::size_t>(n), -1),
      seen(static_cast<std::size_t>(n), -1);
  int components = 0;
  for (int v = 0; v < n; ++v) {
    int u = v;
    while (u != root && seen[static_cast<std::size_t>(u)] != v &&
           component[static_cast<std::size_t>(u)] < 0) {
      seen[static_cast<std::size_t>(u)] = v;
      u = parent(u);
    }
    if (u == root || component[static_cast<std::size_t>(u)] >= 0) continue;
    for (int w = parent(u); w != u; w = parent(w))
      component[static_cast<std::size_t>(w)] = components;
    component[static_cast<std::size_t>(u)] = components++;
  }
  std::vector<int> result;
  if (components == 0) {
    for (int v = 0; v < n; ++v)
      if (v != root) result.push_back(best_in[static_cast<std::size_t>(v)]);
    return result;
  }
  for (int v = 0; v < n; ++v)
    if (component[static_cast<std::size_t>(v)] < 0)
      component[static_cast<std::size_t>(v)] = components++;

  // Contract the cycles: an arc into a node costs what it saves over that node's cheapest.
  std::vector<Arc> contracted;
  std::vector<int> origin;
  for (int i = 0; i < static_cast<int>(arcs.size()); ++i) {
    const Arc& a = arcs[static_cast<std::size_t>(i)];
    const int cu = component[static_cast<std::size_t>(a.from)],
              cv = component[static_cast<std::size_t>(a.to)];
    if (cu == cv || a.to == root) continue;
    contracted.push_back(
        Arc{cu, cv,
            a.cost - arcs[static_cast<std::size_t>(best_in[static_cast<std::size_t>(a.to)])].cost});
    origin.push_back(i);
  }
  const std::vector<int> chosen =
      min_arborescence(components, component[static_cast<std::size_t>(root)], contracted);
  if (chosen.empty()) return {};
  // Expand: each chosen arc enters its node; every other node keeps its cheapest in-arc.
  std::vector<char> entered(static_cast<std::size_t>(n), 0);
  for (int k : chosen) {
    const int i = origin[static_cast<std::size_t>(k)];
    result.push_back(i);
    entered[static_cast<std::size_t>(arcs[static_cast<std::size_t>(i)].to)] = 1;
  }
  for (int v = 0; v < n; ++v)
    if (v != root && !entered[static_cast<std::size_t>(v)])
      result.push_back(best_in[static_cast<std::size_t>(v)]);
  return result;
}

// The cheapest route from each member to each other under per-link prices, through non-GPU
// nodes only (GPUs do not forward without a kernel of their own).
class Routes {
 public:
  Routes(const Topology& topo, const std::vector<int>& members, const std::set<LinkId>& avoided)
      : topo_(topo), members_(members), avoided_(avoided) {
    for (std::size_t i = 0; i < members.size(); ++i)
      index_of_[topo.gpu_of_rank(members[i])] = static_cast<int>(i);
  }

  /// cost[i][j] and the links of the route i -> j (empty when there is none).
  void compute(const std::vector<double>& price) {
    const std::size_t m = members_.size();
    cost_.assign(m, std::vector<double>(m, kInf));
    via_.assign(m, std::vector<std::vector<LinkId>>(m));
    for (std::size_t i = 0; i < m; ++i) from(i, price);
  }

  double cost(std::size_t i, std::size_t j) const { return cost_[i][j]; }
  const std::vector<LinkId>& links(std::size_t i, std::size_t j) const { return via_[i][j]; }

 private:
  void from(std::size_t i, const std::vector<double>& price) {
    const NodeId start = topo_.gpu_of_rank(members_[i]);
    std::vector<double> dist(topo_.node_count(), kInf);
    std::vector<LinkId> pred(topo_.node_count(), static_cast<LinkId>(-1));
    using Entry = std::pair<double, NodeId>;
    std::priority_queue<Entry, std::vector<Entry>, std::greater<>> queue;
    dist[start] = 0;
    queue.push({0, start});
    while (!queue.empty()) {
      const auto [d, v] = queue.top();
      queue.pop();
      if (d > dist[v]) continue;
      if (v != start && topo_.node(v).kind == NodeKind::gpu) continue;  // arrived, no relaying
      for (LinkId l : topo_.out_links(v)) {
        if (avoided_.contains(l)) continue;
        const NodeId w = topo_.link(l).dst;
        const double next = d + price[l] + kHopCost;
        if (next < dist[w]) {
          dist[w] = next;
          pred[w] = l;
          queue.push({next, w});
        }
      }
    }
    for (const auto& [node, j] : index_of_) {
      if (static_cast<std::size_t>(j) == i || dist[node] == kInf) continue;
      cost_[i][static_cast<std::size_t>(j)] = dist[node];
      std::vector<LinkId>& route = via_[i][static_cast<std::size_t>(j)];
      for (NodeId v = node; v != start; v = topo_.link(pred[v]).src) route.push_back(pred[v]);
      std::reverse(route.begin(), route.end());
    }
  }

  const Topology& topo_;
  const std::vector<int>& members_;
  const std::set<LinkId>& avoided_;
  std::map<NodeId, int> index_of_;
  std::vector<std::vector<double>> cost_;
  std::vector<std::vector<std::vector<LinkId>>> via_;
};

// A tree: for each member but the root, its parent and the route from it.
struct Tree {
  int root = 0;
  std::vector<int> parent;                 // -1 for the root
  std::vector<std::vector<LinkId>> route;  // into each member
  std::map<LinkId, int> uses;              // links, each with how many edges cross it
};

// Depth of each member in `tree` (0 at the root).
std::vector<int> depths(const Tree& tree) {
  const std::size_t m = tree.parent.size();
  std::vector<int> depth(m, -1);
  depth[static_cast<std::size_t>(tree.root)] = 0;
  for (bool grew = true; grew;) {
    grew = false;
    for (std::size_t v = 0; v < m; ++v)
      if (depth[v] < 0 && depth[static_cast<std::size_t>(tree.parent[v])] >= 0) {
        depth[v] = depth[static_cast<std::size_t>(tree.parent[v])] + 1;
        grew = true;
      }
  }
  return depth;
}

// `distance[r][i]`, when given, is added to every arc out of member i of root r's tree.
Tree cheapest_tree(const Routes& routes, std::size_t m, int root, const std::vector<int>& members,
                   const std::vector<std::vector<double>>* distance = nullptr) {
  std::vector<Arc> arcs;
  std::vector<std::pair<int, int>> ends;
  auto reach = [&](std::size_t i) {
    return distance ? (*distance)[static_cast<std::size_t>(root)][i] : 0.0;
  };
  for (std::size_t i = 0; i < m; ++i)
    for (std::size_t j = 0; j < m; ++j)
      if (i != j && routes.cost(i, j) < kInf) {
        arcs.push_back(Arc{static_cast<int>(i), static_cast<int>(j), routes.cost(i, j) + reach(i)});
        ends.emplace_back(static_cast<int>(i), static_cast<int>(j));
      }
  const std::vector<int> chosen = min_arborescence(static_cast<int>(m), root, arcs);
  if (chosen.empty())
    fail("pack: rank " + std::to_string(members[static_cast<std::size_t>(root)]) +
         " cannot reach every member of its group through switches and NICs alone");
  Tree tree;
  tree.root = root;
  tree.parent.assign(m, -1);
  tree.route.assign(m, {});
  for (int k : chosen) {
    const auto [from, to] = ends[static_cast<std::size_t>(k)];
    tree.parent[static_cast<std::size_t>(to)] = from;
    tree.route[static_cast<std::size_t>(to)] =
        routes.links(static_cast<std::size_t>(from), static_cast<std::size_t>(to));
    for (LinkId l : tree.route[static_cast<std::size_t>(to)]) ++tree.uses[l];
  }
  return tree;
}

// Phase 2's depth term: over the tree's edges, `distance` from the root to the edge's sender.
double reach_of(const Tree& tree, const std::vector<std::vector<double>>& distance) {
  double total = 0;
  for (int parent : tree.parent)
    if (parent >= 0)
      total += distance[static_cast<std::size_t>(tree.root)][static_cast<std::size_t>(parent)];
  return total;
}

double price_of(const Tree& tree, const std::vector<double>& price) {
  double total = 0;
  for (const auto& [link, count] : tree.uses) total += price[link] * count;
  return total;
}

PackedTree packed(const Topology& topo, const Tree& tree, const std::vector<int>& members,
                  double share) {
  const std::size_t m = members.size();
  const std::vector<int> depth = depths(tree);
  PackedTree out;
  out.share = share;
  for (std::size_t v = 0; v < m; ++v) {
    if (static_cast<int>(v) == tree.root) continue;
    PackedEdge e;
    e.from_rank = members[static_cast<std::size_t>(tree.parent[v])];
    e.to_rank = members[v];
    e.depth = depth[v];
    e.path.push_back(topo.gpu_of_rank(e.from_rank));
    for (LinkId l : tree.route[v]) e.path.push_back(topo.link(l).dst);
    out.edges.push_back(std::move(e));
  }
  std::stable_sort(out.edges.begin(), out.edges.end(),
                   [](const PackedEdge& a, const PackedEdge& b) { return a.depth < b.depth; });
  return out;
}

// The linear program of the packing, grown a column (a tree) at a time. Rows 0..m-1: member
// r's trees carry at least x; rows m..m+links-1: the links' capacities. Column 0 is x.
class PackingLp {
 public:
  PackingLp(const Topology& topo, std::size_t m) : m_(m) {
    const std::size_t links = topo.link_count();
    lp_.setLogLevel(0);
    lp_.resize(static_cast<int>(m + links), 0);
    for (std::size_t r = 0; r < m; ++r) lp_.setRowBounds(static_cast<int>(r), 0, COIN_DBL_MAX);
    for (LinkId l = 0; l < links; ++l)
      lp_.setRowBounds(static_cast<int>(m + l), -COIN_DBL_MAX, topo.link(l).bw_GBps);
    std::vector<int> rows(m);
    std::vector<double> minus_one(m, -1);
    for (std::size_t r = 0; r < m; ++r) rows[r] = static_cast<int>(r);
    lp_.addColumn(static_cast<int>(m), rows.data(), minus_one.data(), 0, COIN_DBL_MAX, -1);  // x
  }

  void add(Tree tree) {
    std::vector<int> rows{tree.root};
    std::vector<double> values{1};
    for (const auto& [link, count] : tree.uses) {
      rows.push_back(static_cast<int>(m_ + link));
      values.push_back(count);
    }
    lp_.addColumn(static_cast<int>(rows.size()), rows.data(), values.data(), 0, COIN_DBL_MAX, 0);
    columns_.push_back(std::move(tree));
  }
  void add(Tree tree, double cost) {
    add(std::move(tree));
    lp_.setObjectiveCoefficient(static_cast<int>(columns_.size()), cost);
  }

  // Phase 2: keeps the best rate (less kRateSlack) and minimises the columns' `cost` instead.
  template <typename Cost>
  void keep_rate_and_minimise(const Cost& cost) {
    const double best = lp_.getColSolution()[0];
    lp_.setColumnLower(0, best * (1 - kRateSlack));
    lp_.setObjectiveCoefficient(0, 0);
    for (std::size_t c = 0; c < columns_.size(); ++c)
      lp_.setObjectiveCoefficient(static_cast<int>(c + 1), cost(columns_[c]));
  }

  void solve() {
    lp_.primal();
    if (lp_.status() != 0)
      fail("pack: the linear program did not solve (CLP status " + std::to_string(lp_.status()) +
           ")");
  }
  double member_dual(std::size_t r) const { return lp_.getRowPrice()[r]; }
  double link_dual(LinkId l) const { return lp_.getRowPrice()[m_ + l]; }
  /// Column 0 is the rate; column c + 1 carries columns()[c].
  const double* values() const { return lp_.getColSolution(); }
  const std::vector<Tree>& columns() const { return columns_; }

 private:
  std::size_t m_;
  ClpSimplex lp_;
  std::vector<Tree> columns_;
};

std::vector<int> checked_members(std::span<const int> member_ranks) {
  std::vector<int> members(member_ranks.begin(), member_ranks.end());
  std::sort(members.begin(), members.end());
  members.erase(std::unique(members.begin(), members.end()), members.end());
  if (members.size() < 2) fail("pack needs a group of at least two ranks");
  if (members.size() > kMaxPackingMembers)
    fail("pack over a group of " + std::to_string(members.size()) + " ranks: at most " +
         std::to_string(kMaxPackingMembers) + " (pack smaller groups, e.g. pack over rails)");
  return members;
}

std::vector<double> time_per_byte(const Topology& topo) {
  std::vector<double> time(topo.link_count());
  for (LinkId l = 0; l < topo.link_count(); ++l) time[l] = 1 / topo.link(l).bw_GBps;
  return time;
}

// Column generation: solves, prices the links by the duals (plus, in phase 2, their time per
// byte), and adds each member's cheapest tree where it improves the LP, until none does.
// Returns the rounds that added a tree.
int generate_columns(PackingLp& lp, Routes& routes, const std::vector<double>& busy,
                     const std::vector<int>& members, int phase,
                     const std::vector<std::vector<double>>* distance = nullptr) {
  const std::size_t m = members.size();
  std::vector<double> price(busy.size());
  int rounds = 0;
  for (int round = 1; round <= kMaxIterations; ++round, ++rounds) {
    lp.solve();
    for (LinkId l = 0; l < price.size(); ++l)
      price[l] = std::max(0.0, -lp.link_dual(l)) + (phase == 2 ? busy[l] : 0);
    routes.compute(price);
    bool improved = false;
    for (std::size_t r = 0; r < m; ++r) {
      Tree tree = cheapest_tree(routes, m, static_cast<int>(r), members, distance);
      const double dual = lp.member_dual(r);
      const double reach = distance ? reach_of(tree, *distance) : 0;
      if (dual - price_of(tree, price) - reach > kImprovement * std::max(1.0, dual)) {
        const double cost = phase == 2 ? price_of(tree, busy) + reach : 0;
        lp.add(std::move(tree), cost);
        improved = true;
      }
    }
    if (!improved) break;
  }
  return rounds;
}

// kDepthWeight x the time per byte from each member to each other along the cheapest chain
// of members (Floyd-Warshall over the routes' costs): what a tree edge's data has already
// spent by the time its sender holds it, weighted for phase 2.
std::vector<std::vector<double>> weighted_chain_distances(const Routes& routes, std::size_t m) {
  std::vector<std::vector<double>> d(m, std::vector<double>(m, kInf));
  for (std::size_t i = 0; i < m; ++i)
    for (std::size_t j = 0; j < m; ++j) d[i][j] = i == j ? 0 : routes.cost(i, j);
  for (std::size_t k = 0; k < m; ++k)
    for (std::size_t i = 0; i < m; ++i)
      for (std::size_t j = 0; j < m; ++j) d[i][j] = std::min(d[i][j], d[i][k] + d[k][j]);
  for (auto& row : d)
    for (double& x : row) x *= kDepthWeight;
  return d;
}

// The trees per member with their shares; trees too light to matter are dropped, and each
// root's shares are of what its kept trees carry.
std::vector<std::vector<PackedTree>> kept_trees(const PackingLp& lp, const Topology& topo,
                                                const std::vector<int>& members) {
  const double* value = lp.values();
  const std::vector<Tree>& columns = lp.columns();
  const double light = kTolerance * value[0];
  std::vector<double> carried(members.size(), 0);
  for (std::size_t c = 0; c < columns.size(); ++c)
    if (value[c + 1] > light) carried[static_cast<std::size_t>(columns[c].root)] += value[c + 1];
  std::vector<std::vector<PackedTree>> trees(members.size());
  for (std::size_t c = 0; c < columns.size(); ++c) {
    const auto r = static_cast<std::size_t>(columns[c].root);
    if (value[c + 1] > light)
      trees[r].push_back(packed(topo, columns[c], members, value[c + 1] / carried[r]));
  }
  for (auto& of_root : trees)
    std::stable_sort(of_root.begin(), of_root.end(),
                     [](const PackedTree& a, const PackedTree& b) { return a.share > b.share; });
  return trees;
}

// Rounding the trees' shares to whole parts: per link, the load the parts put on it per unit
// of rate, and per tree, what one part adds to each of its links.
class PartRounding {
 public:
  PartRounding(const Topology& topo, std::vector<std::vector<PackedTree>>& trees)
      : trees_(trees), uses_(trees.size()), load_(topo.link_count(), 0) {
    const Router router(topo);
    for (std::size_t r = 0; r < trees.size(); ++r)
      for (PackedTree& tree : trees[r]) {
        std::map<LinkId, int> count;
        for (const PackedEdge& e : tree.edges)
          for (LinkId l : router.links_along(e.path)) ++count[l];
        std::vector<Use>& u = uses_[r].emplace_back();
        for (const auto& [l, n] : count)
          u.push_back(Use{l, n / (kPackParts * topo.link(l).bw_GBps)});
      }
  }

  // Each root first gets the floors; the parts left go one at a time, over all roots, to the
  // tree that raises the busiest of its own links the least (ties: the larger remainder, then
  // the lower root and tree).
  void round_up() {
    std::vector<int> left(trees_.size(), kPackParts);
    for (std::size_t r = 0; r < trees_.size(); ++r)
      for (std::size_t t = 0; t < trees_[r].size(); ++t) {
        const int floor = static_cast<int>(std::floor(trees_[r][t].share * kPackParts));
        add(r, t, floor);
        left[r] -= floor;
      }
    for (int round = std::accumulate(left.begin(), left.end(), 0); round > 0; --round) {
      std::tuple<double, double, std::size_t, std::size_t> best{kInf, 0, 0, 0};
      for (std::size_t r = 0; r < trees_.size(); ++r)
        for (std::size_t t = 0; left[r] > 0 && t < trees_[r].size(); ++t) {
          double worst = 0;
          for (const Use& x : uses_[r][t]) worst = std::max(worst, load_[x.link] + x.per_part);
          const double remainder = trees_[r][t].share * kPackParts - trees_[r][t].parts;
          best = std::min(best, std::tuple(worst, -remainder, r, t));
        }
      const auto [worst, minus_remainder, r, t] = best;
      add(r, t, 1);
      --left[r];
    }
  }

  // Parts move between trees of one root, off the busiest link, while that leaves every link
  // they touch below it: each move lowers the busiest load or the number of links at it.
  void move_off_busiest() {
    int moves = 0;
    while (moves++ < kMaxMoves && move_one()) continue;
  }

  /// One over the busiest link's load per unit of rate.
  double rate() const {
    const double busiest = *std::max_element(load_.begin(), load_.end());
    return busiest > 0 ? 1 / busiest : 0;
  }

 private:
  struct Use {
    LinkId link;
    double per_part;
  };

  void add(std::size_t r, std::size_t t, int parts) {
    trees_[r][t].parts += parts;
    for (const Use& x : uses_[r][t]) load_[x.link] += parts * x.per_part;
  }

  bool move_one() {
    const auto busiest =
        static_cast<LinkId>(std::max_element(load_.begin(), load_.end()) - load_.begin());
    const double top = load_[busiest];
    std::map<LinkId, double> change;
    for (std::size_t r = 0; r < trees_.size(); ++r)
      for (std::size_t from = 0; from < trees_[r].size(); ++from) {
        if (trees_[r][from].parts == 0) continue;
        for (std::size_t to = 0; to < trees_[r].size(); ++to) {
          if (to == from) continue;
          change.clear();
          for (const Use& x : uses_[r][from]) change[x.link] -= x.per_part;
          for (const Use& x : uses_[r][to]) change[x.link] += x.per_part;
          const auto off = change.find(busiest);
          if (off == change.end() || off->second >= 0) continue;
          if (std::any_of(change.begin(), change.end(), [&](const auto& lc) {
                return lc.second > 0 && load_[lc.first] + lc.second >= top * (1 - 1e-12);
              }))
            continue;
          add(r, from, -1);
          add(r, to, 1);
          return true;
        }
      }
    return false;
  }

  std::vector<std::vector<PackedTree>>& trees_;
  std::vector<std::vector<std::vector<Use>>> uses_;  // per root, per tree
  std::vector<double> load_;                         // per link
};

// Rounds every tree's share to whole parts of kPackParts, jointly over all roots (largest
// remainders root by root overloaded a NIC of a100x4-degraded by 7%). Returns the rate the
// rounded packing keeps.
double round_parts(const Topology& topo, std::vector<std::vector<PackedTree>>& trees) {
  PartRounding rounding(topo, trees);
  rounding.round_up();
  rounding.move_off_busiest();
  return rounding.rate();
}

// Packings cost up to seconds (the LP and its pricing, about 1.5 s for 32 GPUs) and depend on
// nothing but their inputs; explore compiles hundreds of programs that pack the same groups,
// so the process keeps the last kCachedPackings it computed.
class PackingCache {
 public:
  std::optional<TreePacking> find(const Topology& topo, const std::vector<int>& members,
                                  const std::set<LinkId>& avoided) {
    const std::lock_guard lock(mutex_);
    for (const Entry& e : entries_)
      if (e.members == members && e.avoided == avoided && e.topology == topo) return e.packing;
    return std::nullopt;
  }
  void add(const Topology& topo, const std::vector<int>& members, const std::set<LinkId>& avoided,
           const TreePacking& packing) {
    const std::lock_guard lock(mutex_);
    if (entries_.size() == kCachedPackings) entries_.pop_front();
    entries_.push_back(Entry{topo, members, avoided, packing});
  }

 private:
  static constexpr std::size_t kCachedPackings = 64;
  struct Entry {
    Topology topology;
    std::vector<int> members;
    std::set<LinkId> avoided;
    TreePacking packing;
  };
  std::mutex mutex_;
  std::deque<Entry> entries_;
};

TreePacking compute_packing(const Topology& topo, std::vector<int> members_in,
                            const std::set<LinkId>& avoided) {
  TreePacking result;
  result.members = std::move(members_in);
  const std::vector<int>& members = result.members;
  PackingLp lp(topo, members.size());
  // Start from the trees that are cheapest in time per byte, then price new ones.
  Routes routes(topo, members, avoided);
  const std::vector<double> busy = time_per_byte(topo);
  routes.compute(busy);
  const std::vector<std::vector<double>> distance = weighted_chain_distances(routes, members.size());
  for (std::size_t r = 0; r < members.size(); ++r)
    lp.add(cheapest_tree(routes, members.size(), static_cast<int>(r), members));
  // Phase 1 maximises the rate. The optimum is degenerate (many packings reach it, some
  // through detours: GPU to GPU of one host over the network, some through chains of GPUs
  // eleven deep), so phase 2 keeps the rate and minimises the links' total busy time per byte,
  // sum over links of load / bandwidth, plus a depth term: each tree edge costs, besides its
  // route, kDepthWeight x the time per byte its data has already spent on the cheapest chain
  // from the root to its sender. Every edge is a pipeline stage (a GPU receives a slice before
  // it forwards it), and a run pays the fill and drain of each: on a100x4 the trees were up to
  // 11 deep without it (1.58x the bound at 1 GiB with `pipeline 16`), 2 deep with it. The
  // term is linear per arc, so the pricing (a minimum arborescence) stays exact.
  result.iterations += generate_columns(lp, routes, busy, members, 1);
  lp.keep_rate_and_minimise(
      [&](const Tree& tree) { return price_of(tree, busy) + reach_of(tree, distance); });
  result.iterations += generate_columns(lp, routes, busy, members, 2, &distance);
  result.rate_GBps = lp.values()[0];
  result.trees = kept_trees(lp, topo, members);
  result.rounded_rate_GBps = round_parts(topo, result.trees);
  return result;
}

}  // namespace

TreePacking pack_spanning_trees(const Topology& topo, std::span<const int> member_ranks,
                                const std::set<LinkId>& avoided) {
  static PackingCache cache;
  std::vector<int> members = checked_members(member_ranks);
  if (std::optional<TreePacking> known = cache.find(topo, members, avoided)) return *known;
  TreePacking packing = compute_packing(topo, std::move(members), avoided);
  cache.add(topo, packing.members, avoided, packing);
  return packing;
}

}  // namespace optiflow::topology
