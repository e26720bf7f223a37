// TE-CCL's All-Gather program (Liu et al., SIGCOMM'24; microsoft/TE-CCL c128bf2,
// teccl/solvers/allgather.py and allgather_astar.py) over a window of epochs, on CBC and CLP.
// docs/baselines.md ("TE-CCL") lists the variables and constraints and where this departs.
#include "teccl_model.hpp"

#include <algorithm>
#include <cmath>
#include <map>
#include <queue>
#include <tuple>

#include "optiflow/support/error.hpp"
#include "optiflow/support/strings.hpp"
#include "optiflow/support/units.hpp"

namespace optiflow::baselines::teccl {
namespace {

constexpr double kAlphaThreshold = 0.1;  // TE-CCL's alpha_threshold: smaller alphas count as 0
constexpr double kProgressWeight = 0.1;  // A*: a held chunk's worth per needy GPU, by distance

std::size_t at(int i) {
  return static_cast<std::size_t>(i);
}

// Earliest epoch each node can pass on a chunk that `from` can pass on in epoch 0.
std::vector<int> reach_from(const Fabric& fabric, topology::NodeId from) {
  std::vector<int> best(fabric.is_gpu.size(), kNever);
  using Entry = std::pair<int, topology::NodeId>;
  std::priority_queue<Entry, std::vector<Entry>, std::greater<>> queue;
  best[from] = 0;
  queue.push({0, from});
  while (!queue.empty()) {
    const auto [t, node] = queue.top();
    queue.pop();
    if (t > best[node]) continue;
    for (int a : fabric.out_arcs[node]) {
      const Arc& arc = fabric.arcs[at(a)];
      if (t + arc.delay < best[arc.to]) {
        best[arc.to] = t + arc.delay;
        queue.push({best[arc.to], arc.to});
      }
    }
  }
  return best;
}

}  // namespace

Fabric make_fabric(const topology::Topology& topology, int chunks_per_rank, TecclEpoch epoch,
                   double chunk_bytes) {
  Fabric fabric;
  fabric.ranks = topology.rank_count();
  fabric.chunks_per_rank = chunks_per_rank;
  fabric.node_of_rank.assign(topology.gpus_by_rank().begin(), topology.gpus_by_rank().end());
  for (const topology::Node& node : topology.nodes())
    fabric.is_gpu.push_back(node.kind == topology::NodeKind::gpu);
  const auto links = topology.links();
  const auto by_bw = [](const topology::Link& a, const topology::Link& b) {
    return a.bw_GBps < b.bw_GBps;
  };
  fabric.epoch_GBps = epoch == TecclEpoch::fastest
                          ? std::max_element(links.begin(), links.end(), by_bw)->bw_GBps
                          : std::min_element(links.begin(), links.end(), by_bw)->bw_GBps;
  const double epoch_us = support::transfer_us(chunk_bytes, fabric.epoch_GBps);
  const std::size_t nodes = topology.node_count();
  fabric.in_arcs.resize(nodes);
  fabric.out_arcs.resize(nodes);
  for (std::size_t l = 0; l < links.size(); ++l) {
    const topology::Link& link = links[l];
    Arc arc;
    arc.link = static_cast<topology::LinkId>(l);
    arc.from = link.src;
    arc.to = link.dst;
    arc.chunks_per_epoch = link.bw_GBps / fabric.epoch_GBps;
    arc.beta = std::max(0, static_cast<int>(std::ceil(1.0 / arc.chunks_per_epoch - 1e-9)) - 1);
    const double alpha_epochs = link.alpha_us / epoch_us;
    const int alpha =
        alpha_epochs > kAlphaThreshold ? static_cast<int>(std::ceil(alpha_epochs - 1e-9)) : 0;
    const bool switch_to_gpu = !fabric.is_gpu[link.src] && fabric.is_gpu[link.dst];
    arc.delay = switch_to_gpu ? alpha : 1 + alpha + arc.beta;
    fabric.max_delay = std::max(fabric.max_delay, arc.delay);
    fabric.out_arcs[link.src].push_back(static_cast<int>(l));
    fabric.in_arcs[link.dst].push_back(static_cast<int>(l));
    fabric.arcs.push_back(arc);
  }
  for (std::size_t n = 0; n < nodes; ++n)
    fabric.reach.push_back(reach_from(fabric, static_cast<topology::NodeId>(n)));
  return fabric;
}

State::State(const Fabric& fabric)
    : fabric_(&fabric),
      arrival_(at(fabric.commodities()) * fabric.is_gpu.size(), kNever),
      switch_at_(arrival_.size()),
      load_(fabric.arcs.size()) {
  for (int q = 0; q < fabric.commodities(); ++q) arrival_[slot(q, fabric.source_node(q))] = 0;
}

void State::add(const Flow& flow) {
  const Arc& arc = fabric_->arcs[at(flow.arc)];
  const int when = flow.epoch + arc.delay;
  if (fabric_->is_gpu[arc.to]) {
    arrival_[slot(flow.q, arc.to)] = std::min(arrival_[slot(flow.q, arc.to)], when);
  } else {
    auto& epochs = switch_at_[slot(flow.q, arc.to)];
    if (const auto it = std::lower_bound(epochs.begin(), epochs.end(), when);
        it == epochs.end() || *it != when)
      epochs.insert(it, when);
  }
  auto& load = load_[at(flow.arc)];
  if (load.size() <= at(flow.epoch)) load.resize(at(flow.epoch) + 1, 0);
  ++load[at(flow.epoch)];
  flows_.push_back(flow);
}

int State::load(int arc, int epoch) const {
  const auto& load = load_[at(arc)];
  return epoch >= 0 && at(epoch) < load.size() ? load[at(epoch)] : 0;
}

int State::missing() const {
  int count = 0;
  for (int q = 0; q < fabric_->commodities(); ++q)
    for (topology::NodeId g : fabric_->node_of_rank) count += arrival(q, g) == kNever;
  return count;
}

int State::last_arrival() const {
  int last = 0;
  for (int q = 0; q < fabric_->commodities(); ++q)
    for (topology::NodeId g : fabric_->node_of_rank) last = std::max(last, arrival(q, g));
  return last;
}

int State::earliest(int q, topology::NodeId node) const {
  int best = kNever;
  for (std::size_t n = 0; n < fabric_->is_gpu.size(); ++n) {
    const auto from = static_cast<topology::NodeId>(n);
    const int reach = fabric_->reach[n][node];
    if (reach >= kNever) continue;
    if (fabric_->is_gpu[n]) {
      if (const int a = arrival(q, from); a < kNever) best = std::min(best, a + reach);
    } else if (const auto& epochs = switch_epochs(q, from); !epochs.empty()) {
      best = std::min(best, epochs.front() + reach);
    }
  }
  return best;
}

namespace {

// Builds the window's program: flow x(q, arc, t), buffer b(q, gpu, t) for GPUs that do not
// hold q yet, the copy, switch, capacity and demand constraints, and the objective.
class WindowProgram {
 public:
  WindowProgram(const State& state, const Window& window, bool integer)
      : state_(state), fabric_(state.fabric()), window_(window), integer_(integer) {
    for (int q = 0; q < fabric_.commodities(); ++q) add_commodity(q);
    add_capacity();
  }
  const mip::Model& program() const { return program_; }
  const std::vector<std::pair<int, Flow>>& flow_columns() const { return flows_; }

 private:
  bool needs(int q, topology::NodeId gpu) const { return state_.arrival(q, gpu) == kNever; }

  void add_commodity(int q) {
    const topology::NodeId source = fabric_.source_node(q);
    std::vector<topology::NodeId> needy;
    for (topology::NodeId g : fabric_.node_of_rank)
      if (needs(q, g)) needy.push_back(g);
    if (needy.empty()) return;
    const std::size_t nodes = fabric_.is_gpu.size();
    // How soon each node could get q to a GPU that needs it, and could have q at all.
    std::vector<int> to_needy(nodes, kNever), earliest(nodes);
    for (std::size_t n = 0; n < nodes; ++n) {
      for (topology::NodeId g : needy) to_needy[n] = std::min(to_needy[n], fabric_.reach[n][g]);
      earliest[n] = state_.earliest(q, static_cast<topology::NodeId>(n));
    }
    // Buffers of the GPUs that need q: b(t) = b(t - 1) + what arrives in t.
    std::map<std::pair<topology::NodeId, int>, int> buffer;
    const double arrival_reward = window_.goal == Goal::feasible_only ? 0.0 : -1.0;
    for (topology::NodeId g : needy)
      for (int t = window_.first; t <= window_.horizon; ++t)
        buffer[{g, t}] = program_.add_column(0, 1, arrival_reward, integer_);
    std::map<std::pair<topology::NodeId, int>, std::vector<int>> arriving;  // node, epoch
    std::map<std::pair<topology::NodeId, int>, std::vector<int>> leaving;
    for (int t = window_.first; t < window_.end; ++t)
      for (std::size_t a = 0; a < fabric_.arcs.size(); ++a) {
        const Arc& arc = fabric_.arcs[a];
        if (arc.to == source) continue;
        const int lands = t + arc.delay;
        if (fabric_.is_gpu[arc.to] ? !needs(q, arc.to) || lands > window_.horizon
                                   : lands + to_needy[arc.to] > window_.horizon)
          continue;
        if (earliest[arc.from] > t) continue;
        if (fabric_.is_gpu[arc.from]) {
          const int held = state_.arrival(q, arc.from);
          if (held != kNever && held > t) continue;  // arrives later: not yet sendable
        } else {
          const auto& carried = state_.switch_epochs(q, arc.from);
          const bool given = std::binary_search(carried.begin(), carried.end(), t);
          if (!given && !arriving.contains({arc.from, t})) continue;
        }
        const int col = program_.add_column(0, 1, 0, integer_);
        flows_.push_back({col, Flow{q, static_cast<int>(a), t}});
        arriving[{arc.to, lands}].push_back(col);
        leaving[{arc.from, t}].push_back(col);
        by_arc_[{static_cast<int>(a), t}].push_back(col);
      }
    for (topology::NodeId g : needy)
      for (int t = window_.first; t <= window_.horizon; ++t) {
        std::vector<std::pair<int, double>> terms{{buffer.at({g, t}), 1.0}};
        if (t > window_.first) terms.push_back({buffer.at({g, t - 1}), -1.0});
        if (const auto in = arriving.find({g, t}); in != arriving.end())
          for (int col : in->second) terms.push_back({col, -1.0});
        program_.add_row(terms, 0, 0);
        if (const auto out = leaving.find({g, t}); out != leaving.end())
          for (int col : out->second)
            program_.add_row({{col, 1.0}, {buffer.at({g, t}), -1.0}}, -1e30, 0);
      }
    for (const auto& [key, cols] : leaving) {
      const auto [node, t] = key;
      if (fabric_.is_gpu[node]) continue;
      const auto& carried = state_.switch_epochs(q, node);
      if (std::binary_search(carried.begin(), carried.end(), t)) continue;  // given: <= 1 holds
      std::vector<int> in;
      if (const auto it = arriving.find(key); it != arriving.end()) in = it->second;
      for (int col : cols) {
        std::vector<std::pair<int, double>> terms{{col, 1.0}};
        for (int from : in) terms.push_back({from, -1.0});
        program_.add_row(terms, -1e30, 0);
      }
    }
    if (window_.goal == Goal::progress) reward_in_flight(needy, arriving);
    for (topology::NodeId g : needy) {
      const int final_buffer = buffer.at({g, window_.horizon});
      if (window_.goal != Goal::progress) {
        program_.set_bounds(final_buffer, 1, 1);
        continue;
      }
      double worth = 0;
      for (topology::NodeId d : needy)
        if (d != g) worth += 1.0 / (1.0 + fabric_.reach[g][d]);
      program_.add_objective(final_buffer, -kProgressWeight * worth);
    }
  }

  // A*: a chunk that reaches a switch after the window, for the next round to forward, is
  // worth as much as its closeness to the GPUs that need it; once per switch and epoch.
  void reward_in_flight(
      const std::vector<topology::NodeId>& needy,
      const std::map<std::pair<topology::NodeId, int>, std::vector<int>>& arriving) {
    for (const auto& [key, cols] : arriving) {
      const auto [node, lands] = key;
      if (fabric_.is_gpu[node] || lands < window_.end) continue;
      double worth = 0;
      for (topology::NodeId d : needy) worth += 1.0 / (1.0 + fabric_.reach[node][d]);
      const int ahead = program_.add_column(0, 1, -kProgressWeight * worth, integer_);
      std::vector<std::pair<int, double>> terms{{ahead, 1.0}};
      for (int col : cols) terms.push_back({col, -1.0});
      program_.add_row(terms, -1e30, 0);
    }
  }

  // Each arc carries at most (beta + 1) x chunks_per_epoch chunks in any beta + 1 epochs.
  void add_capacity() {
    for (std::size_t a = 0; a < fabric_.arcs.size(); ++a) {
      const Arc& arc = fabric_.arcs[a];
      const double capacity = (arc.beta + 1) * arc.chunks_per_epoch;
      const double limit = integer_ ? std::floor(capacity + 1e-9) : capacity;
      for (int end = window_.first; end < window_.end; ++end) {
        std::vector<std::pair<int, double>> terms;
        double carried = 0;
        for (int t = end - arc.beta; t <= end; ++t) {
          if (t < window_.first) {
            carried += state_.load(static_cast<int>(a), t);
          } else if (const auto it = by_arc_.find({static_cast<int>(a), t}); it != by_arc_.end()) {
            for (int col : it->second) terms.push_back({col, 1.0});
          }
        }
        if (!terms.empty()) program_.add_row(terms, -1e30, limit - carried);
      }
    }
  }

  const State& state_;
  const Fabric& fabric_;
  Window window_;
  bool integer_;
  mip::Model program_;
  std::vector<std::pair<int, Flow>> flows_;
  std::map<std::pair<int, int>, std::vector<int>> by_arc_;
};

// CBC's settings for TE-CCL: what its solves have always run with (its schedules depend on it).
constexpr int kSeed = 12345;
constexpr double kMinSeconds = 0.1;

// The window's flows whose columns exceed `threshold` in the solution, if one was found.
Solved extract(const std::vector<std::pair<int, Flow>>& columns, mip::Solution solution,
               double threshold) {
  Solved solved;
  if (solution.found())
    for (const auto& [col, flow] : columns)
      if (const double x = solution.values[at(col)]; x > threshold) {
        solved.flows.push_back(flow);
        solved.values.push_back(x);
      }
  solved.solution = std::move(solution);
  return solved;
}

Solved solve_integer(const WindowProgram& built, const Window& window,
                     const SynthesisOptions& options) {
  mip::Limits limits;
  limits.time_s = std::max(kMinSeconds, options.time_limit_s);
  limits.gap = options.gap_limit;
  limits.max_nodes = options.max_nodes;
  limits.seed = kSeed;
  if (window.goal == Goal::feasible_only) limits.max_solutions = 1;  // the epoch search's probes
  limits.settings = mip::Settings::bare_table;
  return extract(built.flow_columns(), mip::solve(built.program(), limits), 0.5);
}

}  // namespace

Solved solve_window(const State& state, const Window& window, bool integer,
                    const SynthesisOptions& options) {
  WindowProgram built(state, window, integer);
  const int columns = built.program().columns(), rows = built.program().rows();
  Solved solved = integer
                      ? solve_integer(built, window, options)
                      : extract(built.flow_columns(),
                                mip::solve_relaxation(built.program(), options.time_limit_s), 1e-7);
  solved.columns = columns;
  solved.rows = rows;
  return solved;
}

}  // namespace optiflow::baselines::teccl
