// TACCL's routing stage (taccl/routing.py, TACCLRouting._encode): a MILP that picks, for every
// chunk, the tree of links it crosses and when, minimising the time by which every rank has every
// chunk under per-link and per-switch bandwidth, within the sketch's relay and symmetry rules.
//
// Gurobi's indicator constraints (is_sent -> start == send + latency) become big-M rows; the
// send times are eliminated (send = start at the receiver - latency, where sent), and the
// symmetry equalities are substituted (one column per orbit), which CBC needs and Gurobi's
// presolve does on its own.
#include <algorithm>
#include <cmath>
#include <map>
#include <numeric>
#include <optional>

#include "mip.hpp"
#include "optiflow/support/error.hpp"
#include "optiflow/support/strings.hpp"
#include "taccl_internal.hpp"

namespace optiflow::baselines::taccl {
namespace {

using mip::Expr;

constexpr double kMu = 0.01;  // TACCL's weight of the secondary objective (routing.py: mu)

class UnionFind {
 public:
  explicit UnionFind(std::size_t n) : parent_(n) { std::iota(parent_.begin(), parent_.end(), 0); }
  std::size_t find(std::size_t a) {
    while (parent_[a] != a) a = parent_[a] = parent_[parent_[a]];
    return a;
  }
  // The smaller root wins, so the zero slot (0) stays a root.
  void join(std::size_t a, std::size_t b) {
    a = find(a);
    b = find(b);
    if (a != b) parent_[std::max(a, b)] = std::min(a, b);
  }

 private:
  std::vector<std::size_t> parent_;
};

class RoutingModel {
 public:
  RoutingModel(const LogicalTopology& logical, const TacclSketch& sketch, const ChunkSpace& space)
      : logical_(logical),
        sketch_(sketch),
        space_(space),
        links_(static_cast<int>(logical.links.size())),
        slots_(1 + static_cast<std::size_t>(space.chunks()) *
                       static_cast<std::size_t>(links_ + logical.ranks)) {
    double max_cost = 0;
    for (const LogicalLink& l : logical.links) max_cost = std::max(max_cost, l.cost);
    // Every chunk sent to every rank one after another, over the slowest link, is a schedule.
    horizon_ = max_cost * space.chunks() * logical.ranks;
    big_m_ = horizon_ + max_cost;
  }

  mip::Solution solve(const SynthesisOptions& options, StageReport& report, Routing& routing) {
    restrict_links();
    apply_symmetry();
    make_columns();
    add_rows();
    report.columns = mip_.columns();
    report.rows = mip_.rows();
    report.integers = mip_.integers();
    if (options.progress)
      options.progress(support::strprintf(
          "taccl: routing MILP: %d chunks, %d links, %d columns (%d binary), %d rows",
          space_.chunks(), links_, report.columns, report.integers, report.rows));
    const std::optional<std::vector<double>> start = heuristic_start();
    mip::Solution result = solve_stage(mip_, options, report, start ? &*start : nullptr);
    if (result.found()) extract(result, routing);
    return result;
  }

 private:
  std::size_t x_slot(int c, int e) const {
    return 1 + static_cast<std::size_t>(c) * static_cast<std::size_t>(links_) +
           static_cast<std::size_t>(e);
  }
  std::size_t start_slot(int c, int r) const {
    return 1 + static_cast<std::size_t>(space_.chunks()) * static_cast<std::size_t>(links_) +
           static_cast<std::size_t>(c) * static_cast<std::size_t>(logical_.ranks) +
           static_cast<std::size_t>(r);
  }
  int node_of(int r) const { return logical_.node_of(r); }
  const LogicalLink& link(int e) const { return logical_.links[static_cast<std::size_t>(e)]; }

  // A chunk never enters its own rank (it starts there); across nodes, TACCL's relay relaxation
  // (_add_relay_relaxation): a chunk leaves its home node only from its relay GPUs, only to the
  // sketch's receivers, never comes back, and reaches every other node straight from home.
  void restrict_links() {
    std::map<int, std::vector<int>> relays_of_gpu;  // local GPU -> local relays for its chunks
    for (const auto& [relay, gpus] : sketch_.chunk_to_relay)
      for (int g : gpus) relays_of_gpu[g].push_back(relay);
    const int n = logical_.per_node;
    for (int c = 0; c < space_.chunks(); ++c) {
      const int owner = space_.owner(c);
      for (int e = 0; e < links_; ++e)
        if (link(e).dst == owner) zero_.push_back(x_slot(c, e));
      uf_join_later_.push_back({start_slot(c, owner), 0});
      if (logical_.nodes == 1) continue;
      const int home = node_of(owner);
      for (int other = 0; other < logical_.nodes; ++other) {
        if (other == home) continue;
        std::vector<int> crossing;
        for (int e = 0; e < links_; ++e) {
          const LogicalLink& l = link(e);
          const bool out = node_of(l.src) == home && node_of(l.dst) == other;
          const bool back = node_of(l.src) == other && node_of(l.dst) == home;
          if (back) zero_.push_back(x_slot(c, e));
          if (!out) continue;
          bool relay_ok = true;
          if (auto it = relays_of_gpu.find(owner % n); it != relays_of_gpu.end())
            relay_ok =
                std::find(it->second.begin(), it->second.end(), l.src % n) != it->second.end();
          else if (!sketch_.chunk_to_relay.empty())
            relay_ok = false;
          if (relay_ok)
            crossing.push_back(e);
          else
            zero_.push_back(x_slot(c, e));
        }
        crossings_.push_back({c, std::move(crossing)});
      }
    }
  }

  int sym_rank(int r, int offset, int size) const {
    return (r % size + offset) % size + (r / size) * size;
  }

  // TACCL's _add_symmetry: x[c,src,r] == x[c',src',r'] for src and r in one group, and
  // start[c,r] == start[c',r'], where ' rotates each group of `size` ranks by `offset`.
  void apply_symmetry() {
    UnionFind uf(slots_);
    for (std::size_t z : zero_) uf.join(z, 0);
    for (const auto& [a, b] : uf_join_later_) uf.join(a, b);
    for (const auto& [offset, size] : sketch_.symmetry_offsets) {
      if (size <= 0 || logical_.ranks % size != 0)
        throw support::InputError(
            support::SourceLocation{sketch_.source, 0, 0, "symmetry_offsets"},
            support::strprintf("taccl: group size %d does not divide the %d ranks", size,
                               logical_.ranks));
      for (int c = 0; c < space_.chunks(); ++c) {
        const int owner_sym = sym_rank(space_.owner(c), offset, size);
        const int c_sym = owner_sym * space_.chunkup + c % space_.chunkup;
        for (int e = 0; e < links_; ++e) {
          const LogicalLink& l = link(e);
          if (l.src / size != l.dst / size) continue;
          const int image =
              logical_.link(sym_rank(l.src, offset, size), sym_rank(l.dst, offset, size));
          if (image < 0) {
            uf.join(x_slot(c, e), 0);  // its image is no link: neither is used
            continue;
          }
          uf.join(x_slot(c, e), x_slot(c_sym, image));
        }
        for (int r = 0; r < logical_.ranks; ++r)
          uf.join(start_slot(c, r), start_slot(c_sym, sym_rank(r, offset, size)));
      }
    }
    root_.resize(slots_);
    for (std::size_t s = 0; s < slots_; ++s) root_[s] = uf.find(s);
  }

  void make_columns() {
    column_of_root_.assign(slots_, -1);
    time_ = mip_.add_column(0, horizon_, 1.0, false);
    for (int c = 0; c < space_.chunks(); ++c) {
      for (int e = 0; e < links_; ++e) column(x_slot(c, e), true);
      for (int r = 0; r < logical_.ranks; ++r) column(start_slot(c, r), false);
    }
  }

  void column(std::size_t slot, bool binary) {
    const std::size_t root = root_[slot];
    if (root == 0 || column_of_root_[root] >= 0) return;
    column_of_root_[root] = binary ? mip_.add_binary() : mip_.add_column(0, horizon_, 0, false);
  }

  Expr slot_expr(std::size_t slot) const {
    const int col = column_of_root_[root_[slot]];
    return col < 0 ? Expr() : Expr::var(col);
  }
  Expr x(int c, int e) const { return slot_expr(x_slot(c, e)); }
  bool used(int c, int e) const { return root_[x_slot(c, e)] != 0; }
  Expr start(int c, int r) const { return slot_expr(start_slot(c, r)); }

  void add_rows() {
    const Expr time = Expr::var(time_);
    const int chunks = space_.chunks();
    // Each rank but the owner receives each chunk exactly once, by the time `time`, after its
    // sender had it (the indicator of routing.py as big-M rows).
    for (int c = 0; c < chunks; ++c)
      for (int r = 0; r < logical_.ranks; ++r) {
        if (r == space_.owner(c)) continue;
        Expr received;
        for (int e = 0; e < links_; ++e) {
          if (link(e).dst != r || !used(c, e)) continue;
          received += x(c, e);
          // start[c,r] >= start[c,src] + cost - M (1 - x)
          mip_.less_equal(start(c, link(e).src) + link(e).cost - big_m_ + big_m_ * x(c, e),
                          start(c, r));
        }
        if (received.terms.empty())
          throw support::InputError(
              support::SourceLocation{sketch_.source, 0, 0, {}},
              support::strprintf("taccl: the sketch leaves rank %d no link to receive chunk %d on",
                                 r, c));
        mip_.equal(received, 1);
        mip_.less_equal(start(c, r), time);
      }
    // Each link moves one chunk at a time.
    std::optional<int> max_util, min_util;
    if (sketch_.intra == TacclIntraStrategy::minmax)
      max_util = mip_.add_column(0, horizon_, kMu, false);
    if (sketch_.intra == TacclIntraStrategy::maxmin)
      min_util = mip_.add_column(0, horizon_, -kMu, false);
    auto bound_load = [&](const Expr& load) {
      mip_.less_equal(load, time);
      if (max_util) mip_.less_equal(load, Expr::var(*max_util));
      if (min_util) mip_.less_equal(Expr::var(*min_util), load);
    };
    for (int e = 0; e < links_; ++e) {
      Expr load;
      for (int c = 0; c < chunks; ++c) load += link(e).cost * x(c, e);
      if (!load.terms.empty()) bound_load(load);
    }
    // A switch moves one chunk at a time into (or out of) each GPU; a GPU's sends through a
    // switch end after it has the chunk plus one switch time per copy it sends.
    for (const Hyperedge& h : logical_.switches) {
      Expr load;
      for (int c = 0; c < chunks; ++c)
        for (int e : h.links) load += h.cost * x(c, e);
      if (!load.terms.empty()) bound_load(load);
      if (!h.out) continue;
      for (int c = 0; c < chunks; ++c) {
        Expr copies;
        for (int e : h.links) copies += h.cost * x(c, e);
        if (copies.terms.empty()) continue;
        for (int e : h.links)
          if (used(c, e))
            mip_.less_equal(start(c, h.gpu) + copies - big_m_ + big_m_ * x(c, e), time);
      }
    }
    for (const auto& [c, crossing] : crossings_) {
      Expr any;
      for (int e : crossing) any += x(c, e);
      if (any.terms.empty())
        throw support::InputError(
            support::SourceLocation{sketch_.source, 0, 0, "internode_sketch"},
            support::strprintf("taccl: the relay map gives chunk %d no way out of node %d", c,
                               node_of(space_.owner(c))));
      mip_.less_equal(1, any);
    }
    if (sketch_.enforce_ordering) add_relay_ordering();
    if (sketch_.intra == TacclIntraStrategy::switch_ && sketch_.hyperedge != TacclHyperedge::none)
      add_unique_links();
  }

  // _enforce_ordering: a relay GPU sends its own chunks out before the chunks it relays.
  void add_relay_ordering() {
    const int n = logical_.per_node;
    for (const auto& [relay, gpus] : sketch_.chunk_to_relay)
      for (int node = 0; node < logical_.nodes; ++node) {
        const int src = node * n + relay;
        for (int e = 0; e < links_; ++e) {
          if (link(e).src != src || !link(e).remote) continue;
          const int r = link(e).dst;
          for (int g : gpus) {
            const int other = node * n + g;
            if (other == src) continue;
            for (int k = 0; k < space_.chunkup; ++k)
              for (int j = 0; j < space_.chunkup; ++j) {
                const int c = other * space_.chunkup + k, own = src * space_.chunkup + j;
                if (!used(c, e) || !used(own, e)) continue;
                mip_.less_equal(start(own, r) + link(e).cost - 2 * big_m_ + big_m_ * x(own, e) +
                                    big_m_ * x(c, e),
                                start(c, r));
              }
          }
        }
      }
  }

  // _add_min_max_unique: count the GPU pairs of the first node that a switch uses at all, and
  // make the objective prefer few (uc-min) or many (uc-max).
  void add_unique_links() {
    const double weight = sketch_.hyperedge == TacclHyperedge::uc_min ? kMu : -kMu;
    for (int e = 0; e < links_; ++e) {
      const LogicalLink& l = link(e);
      if (l.src >= logical_.per_node || l.dst >= logical_.per_node) continue;
      Expr any;
      const int at_all = mip_.add_binary(weight);
      at_all_.emplace_back(at_all, e);
      for (int c = 0; c < space_.chunks(); ++c) {
        if (!used(c, e)) continue;
        mip_.less_equal(x(c, e), Expr::var(at_all));
        any += x(c, e);
      }
      mip_.less_equal(Expr::var(at_all), any);
    }
  }

  // Each chunk's cheapest-path tree over the links the sketch leaves it: via[c][r] = the link
  // r receives c on. Trees are built for one chunk of each symmetry orbit and carried to the
  // others by the rotations, so that they agree with the substituted symmetry; nullopt where a
  // rank is unreachable or a rotation fixes a chunk but not its tree.
  std::optional<std::vector<std::vector<int>>> symmetric_trees() const {
    const auto ranks = static_cast<std::size_t>(logical_.ranks);
    std::vector<std::vector<int>> via(static_cast<std::size_t>(space_.chunks()));
    for (int first = 0; first < space_.chunks(); ++first) {
      if (!via[static_cast<std::size_t>(first)].empty()) continue;
      std::vector<int> tree = cheapest_tree(first);
      if (tree.empty()) return std::nullopt;
      std::vector<std::pair<int, std::vector<int>>> queue{{first, std::move(tree)}};
      via[static_cast<std::size_t>(first)] = queue.front().second;
      while (!queue.empty()) {
        auto [c, links] = std::move(queue.back());
        queue.pop_back();
        for (const auto& [offset, size] : sketch_.symmetry_offsets) {
          const int image =
              sym_rank(space_.owner(c), offset, size) * space_.chunkup + c % space_.chunkup;
          std::vector<int> moved(ranks, -1);
          for (std::size_t r = 0; r < ranks; ++r) {
            if (links[r] < 0) continue;
            const LogicalLink& l = link(links[r]);
            const int e =
                logical_.link(sym_rank(l.src, offset, size), sym_rank(l.dst, offset, size));
            if (e < 0 || !used(image, e)) return std::nullopt;
            moved[static_cast<std::size_t>(link(e).dst)] = e;
          }
          auto& have = via[static_cast<std::size_t>(image)];
          if (have.empty()) {
            have = moved;
            queue.emplace_back(image, std::move(moved));
          } else if (have != moved) {
            return std::nullopt;
          }
        }
      }
    }
    return via;
  }

  std::vector<int> cheapest_tree(int c) const {
    const auto ranks = static_cast<std::size_t>(logical_.ranks);
    std::vector<double> dist(ranks, mip::kInf);
    std::vector<int> via(ranks, -1);
    std::vector<char> done(ranks, 0);
    dist[static_cast<std::size_t>(space_.owner(c))] = 0;
    for (std::size_t round = 0; round < ranks; ++round) {
      int u = -1;
      for (std::size_t r = 0; r < ranks; ++r)
        if (!done[r] && dist[r] < mip::kInf &&
            (u < 0 || dist[r] < dist[static_cast<std::size_t>(u)]))
          u = static_cast<int>(r);
      if (u < 0) break;
      done[static_cast<std::size_t>(u)] = 1;
      for (int e = 0; e < links_; ++e) {
        const LogicalLink& l = link(e);
        if (l.src != u || !used(c, e)) continue;
        const double d = dist[static_cast<std::size_t>(u)] + l.cost;
        if (d < dist[static_cast<std::size_t>(l.dst)] - 1e-12) {
          dist[static_cast<std::size_t>(l.dst)] = d;
          via[static_cast<std::size_t>(l.dst)] = e;
        }
      }
    }
    for (std::size_t r = 0; r < ranks; ++r)
      if (dist[r] >= mip::kInf) return {};
    return via;
  }

  // A first incumbent, as Gurobi's heuristics would find one: the symmetric cheapest-path
  // trees, timed either uncontended (each rank has a chunk at its path's cost) or, where that
  // breaks a row (a relay's ordering), one hop per round of the slowest link's time; the
  // makespan as small as the rows then allow. nullopt where neither meets every row.
  std::optional<std::vector<double>> heuristic_start() const {
    const auto trees = symmetric_trees();
    if (!trees) return std::nullopt;
    double max_cost = 0;
    for (const LogicalLink& l : logical_.links) max_cost = std::max(max_cost, l.cost);
    for (const bool by_rounds : {false, true}) {
      std::vector<double> values(static_cast<std::size_t>(mip_.columns()), 0.0);
      auto assign = [&](std::size_t slot, double v) {
        if (const int col = column_of_root_[root_[slot]]; col >= 0)
          values[static_cast<std::size_t>(col)] = v;
      };
      for (int c = 0; c < space_.chunks(); ++c) {
        const auto& via = (*trees)[static_cast<std::size_t>(c)];
        for (int r = 0; r < logical_.ranks; ++r) {
          double when = 0;
          for (int at = r; at != space_.owner(c);) {
            const int e = via[static_cast<std::size_t>(at)];
            when += by_rounds ? max_cost : link(e).cost;
            at = link(e).src;
          }
          assign(start_slot(c, r), when);
        }
        for (int e = 0; e < links_; ++e)
          assign(x_slot(c, e), via[static_cast<std::size_t>(link(e).dst)] == e ? 1.0 : 0.0);
      }
      for (const auto& [column, e] : at_all_) {
        double any = 0;
        for (int c = 0; c < space_.chunks(); ++c)
          if (const Expr v = x(c, e); !v.terms.empty())
            any = std::max(any, values[static_cast<std::size_t>(v.terms[0].first)]);
        values[static_cast<std::size_t>(column)] = any;
      }
      if (max_util_)
        values[static_cast<std::size_t>(*max_util_)] = mip_.least_value(*max_util_, values);
      values[static_cast<std::size_t>(time_)] = mip_.least_value(time_, values);
      if (mip_.feasible(values)) return values;
    }
    return std::nullopt;
  }

  void extract(const mip::Solution& result, Routing& routing) const {
    auto value = [&](const Expr& e) {
      double v = e.constant;
      for (const auto& [col, coef] : e.terms)
        v += coef * result.values[static_cast<std::size_t>(col)];
      return v;
    };
    const auto chunks = static_cast<std::size_t>(space_.chunks());
    routing.sent.assign(chunks, std::vector<char>(static_cast<std::size_t>(links_), 0));
    routing.send_time.assign(chunks, std::vector<double>(static_cast<std::size_t>(links_), 0));
    for (int c = 0; c < space_.chunks(); ++c)
      for (int e = 0; e < links_; ++e)
        if (value(x(c, e)) > 0.5) {
          routing.sent[static_cast<std::size_t>(c)][static_cast<std::size_t>(e)] = 1;
          routing.send_time[static_cast<std::size_t>(c)][static_cast<std::size_t>(e)] =
              value(start(c, link(e).dst)) - link(e).cost;
        }
  }

  const LogicalTopology& logical_;
  const TacclSketch& sketch_;
  const ChunkSpace& space_;
  int links_;
  std::size_t slots_;
  double horizon_ = 0, big_m_ = 0;
  std::vector<std::size_t> zero_;
  std::vector<std::pair<std::size_t, std::size_t>> uf_join_later_;
  std::vector<std::pair<int, std::vector<int>>> crossings_;
  std::vector<std::size_t> root_;
  std::vector<int> column_of_root_;
  int time_ = -1;
  std::optional<int> max_util_;
  std::vector<std::pair<int, int>> at_all_;  // (column, link) of uc-min/uc-max's "used at all"
  mip::Model mip_{/*merge_identical_rows=*/true};  // the symmetry makes many
};

}  // namespace

Routing solve_routing(const LogicalTopology& logical, const TacclSketch& sketch,
                      const ChunkSpace& space, const SynthesisOptions& options) {
  Routing routing;
  routing.report.name = "routing";
  RoutingModel model(logical, sketch, space);
  const mip::Solution result = model.solve(options, routing.report, routing);
  if (result.status == mip::Status::infeasible)
    throw support::InputError(
        support::SourceLocation{sketch.source, 0, 0, {}},
        "taccl: the routing MILP is infeasible: the sketch's rules (relay map, symmetry offsets) "
        "leave no way to bring every chunk to every GPU");
  if (!result.found())
    throw support::InputError(support::SourceLocation{sketch.source, 0, 0, {}},
                              "taccl: the routing MILP found no solution (" +
                                  routing.report.status +
                                  "); raise the time limit or loosen the sketch");
  return routing;
}

}  // namespace optiflow::baselines::taccl
