// TE-CCL-style All-Gather synthesis (Liu et al., "Rethinking Machine Learning Collective
// Communication as a Multi-Commodity Flow Problem", SIGCOMM'24; microsoft/TE-CCL c128bf2): the
// epoch model of teccl_model.hpp solved three ways. milp: the LP's least feasible epoch count
// bounds the search from below and its greedy rounding from above, a binary search over the
// epoch count with CBC (first solution each), then the early-delivery objective at the least
// count found. lp: the relaxation alone, rounded. astar: TE-CCL's A* rounds, a few epochs at a
// time, each round's deliveries carried into the next.
#include <CbcConfig.h>
#include <ClpConfig.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <map>
#include <set>
#include <stdexcept>
#include <tuple>

#include "optiflow/baselines/synthesis.hpp"
#include "optiflow/support/error.hpp"
#include "optiflow/support/strings.hpp"
#include "teccl_model.hpp"

namespace optiflow::baselines {
namespace {

using teccl::Fabric;
using teccl::Goal;
using teccl::Solved;
using teccl::State;
using teccl::Window;

// TE-CCL solves for one chunk size; our schedules serve every size, so the alphas are weighed
// at this output buffer (DESIGN.md: schedules are size-independent).
constexpr double kReferenceBufferBytes = 64.0 * (1 << 20);
constexpr int kAstarMinEpochs = 2;  // A* round length when the fabric's delays allow
constexpr int kDefaultChunks = 1;   // TE-CCL's num_chunks default

std::size_t at(int i) {
  return static_cast<std::size_t>(i);
}

class Synthesis {
 public:
  Synthesis(const topology::Topology& topology, const SynthesisOptions& options)
      : topology_(topology),
        options_(options),
        chunks_(options.teccl_chunks > 0 ? options.teccl_chunks : kDefaultChunks),
        fabric_(teccl::make_fabric(topology, chunks_, *options.teccl_epoch,
                                   kReferenceBufferBytes / (topology.rank_count() * chunks_))) {}

  Synthesized run() {
    Synthesized result;
    State state = options_.teccl_mode == TecclMode::astar ? astar(result) : search(result);
    finish(state, result);
    return result;
  }

 private:
  void say(const std::string& line) const {
    if (options_.progress) options_.progress("teccl: " + line);
  }
  double elapsed() const {
    return std::chrono::duration<double>(std::chrono::steady_clock::now() - start_).count();
  }

  // No schedule is shorter than the farthest pair, or than the epochs a GPU's in-links need
  // for its chunks: a link carries (beta + 1) x chunks_per_epoch in each beta + 1 epochs.
  int lower_bound() const {
    int epochs = 1;
    const double needed = (fabric_.ranks - 1) * chunks_;
    for (int r = 0; r < fabric_.ranks; ++r) {
      const topology::NodeId gpu = fabric_.node_of_rank[at(r)];
      const auto carried = [&](int k) {
        double in = 0;
        for (int a : fabric_.in_arcs[gpu]) {
          const teccl::Arc& arc = fabric_.arcs[at(a)];
          in += std::ceil(static_cast<double>(k) / (arc.beta + 1)) * (arc.beta + 1) *
                arc.chunks_per_epoch;
        }
        return in;
      };
      while (carried(epochs) < needed - 1e-9) ++epochs;
      for (int s = 0; s < fabric_.ranks; ++s)
        epochs = std::max(epochs, fabric_.reach[fabric_.node_of_rank[at(s)]][gpu]);
    }
    return epochs;
  }

  Solved solve(int epochs, Goal goal, bool integer) {
    const State empty(fabric_);
    // Flows in epoch `epochs` too: a switch's zero-delay forward into a GPU then still lands
    // by the end (TE-CCL's use_one_less_epoch handles the same case).
    Solved solved =
        teccl::solve_window(empty, Window{0, epochs + 1, epochs, goal}, integer, options_);
    say(support::strprintf(
        "%s at %d epochs: %s (%d columns, %d rows), %.2f s",
        integer ? (goal == Goal::feasible_only ? "MILP probe" : "MILP") : "LP relaxation", epochs,
        outcome(solved).c_str(), solved.columns, solved.rows, elapsed()));
    return solved;
  }

  static std::string outcome(const Solved& s) {
    switch (s.status()) {
      case mip::Status::optimal:
        return "optimal";
      case mip::Status::feasible:
        return s.solution.time_limit ? "feasible (time limit)" : "feasible";
      case mip::Status::infeasible:
        return "infeasible";
      case mip::Status::no_solution:
        break;
    }
    return s.solution.time_limit ? "no solution (time limit)" : "no solution";
  }

  State from(const std::vector<teccl::Flow>& flows) const {
    State state(fabric_);
    for (const teccl::Flow& f : flows) state.add(f);
    return state;
  }

  // The least epoch count whose LP is feasible (doubling, then bisecting), and its solution.
  std::pair<int, Solved> least_lp() {
    int low = lower_bound() - 1;  // known infeasible
    int high = low + 1;
    Solved at_high = solve(high, Goal::all_by_horizon, false);
    while (!at_high.found()) {
      if (at_high.status() != mip::Status::infeasible)
        throw support::InputError(support::SourceLocation{topology_.name(), 0, 0, {}},
                                  "teccl: CLP stopped without solving the relaxation at " +
                                      std::to_string(high) + " epochs (raise the time limit)");
      low = high;
      high = std::max(high + 1, 2 * high);
      at_high = solve(high, Goal::all_by_horizon, false);
    }
    while (high - low > 1) {
      const int mid = (low + high) / 2;
      Solved s = solve(mid, Goal::all_by_horizon, false);
      if (s.found()) {
        high = mid;
        at_high = std::move(s);
      } else {
        low = mid;
      }
    }
    return {high, std::move(at_high)};
  }

  State rounded(const Solved& lp) const {
    teccl::Guide guide;
    for (std::size_t i = 0; i < lp.flows.size(); ++i) guide[lp.flows[i]] = lp.values[i];
    State state(fabric_);
    teccl::round_greedily(state, 0, guide);
    return state;
  }

  // milp and lp: the relaxation, its rounding, and for milp the search and the MILP.
  State search(Synthesized& result) {
    auto [lp_epochs, lp] = least_lp();
    State best = rounded(lp);
    const int rounded_epochs = best.last_arrival();
    result.notes.push_back(support::strprintf(
        "LP relaxation feasible from %d epochs (CLP); its greedy rounding takes %d", lp_epochs,
        rounded_epochs));
    if (options_.teccl_mode == TecclMode::lp) {
      result.solver.solver = std::string("CLP ") + CLP_VERSION;
      result.solver.status =
          support::strprintf("LP optimal at %d epochs, rounded to %d", lp_epochs, rounded_epochs);
      return best;
    }
    result.solver.solver = std::string("CBC ") + CBC_VERSION;
    int low = lp_epochs - 1, high = rounded_epochs, unproven = 0;
    while (high - low > 1) {
      const int mid = (low + high) / 2;
      const Solved probe = solve(mid, Goal::feasible_only, true);
      if (probe.found()) {
        best = from(probe.flows);
        high = best.last_arrival();
      } else {
        if (probe.status() == mip::Status::no_solution) ++unproven;
        low = mid;
      }
    }
    result.notes.push_back(support::strprintf(
        "binary search over the epoch count: %d epochs the least found%s", high,
        unproven ? support::strprintf(" (%d shorter counts unproven: time limit)", unproven).c_str()
                 : ""));
    const Solved final_solve = solve(high, Goal::all_by_horizon, true);
    if (final_solve.found()) {
      best = from(final_solve.flows);
      result.solver.status = outcome(final_solve);
      if (final_solve.status() == mip::Status::feasible && !final_solve.solution.time_limit)
        result.solver.status = "feasible (gap limit)";
      result.solver.gap = final_solve.gap();
    } else {
      result.solver.status =
          "no MILP solution at the least epoch count within the time limit; "
          "kept the search's";
      result.notes.push_back(
          "the schedule is the epoch search's first solution (or the LP "
          "rounding's), not optimized for early delivery");
    }
    return best;
  }

  // A*: rounds of `length` epochs; arrivals are rewarded up to `lookahead` epochs (the longest
  // GPU-to-GPU trip) past a round, and chunks still in a switch path at its end by how close
  // they are to the GPUs that need them (TE-CCL's buffer_ahead and future flows).
  State astar(Synthesized& result) {
    const int length = std::max(kAstarMinEpochs, fabric_.max_delay + 1);
    int lookahead = 0;
    for (topology::NodeId u : fabric_.node_of_rank)
      for (topology::NodeId g : fabric_.node_of_rank)
        if (fabric_.reach[u][g] < teccl::kNever)
          lookahead = std::max(lookahead, fabric_.reach[u][g]);
    State state(fabric_);
    int rounds = 0, optimal = 0, greedy_rounds = 0;
    double worst_gap = 0;
    while (state.missing() > 0) {
      const int first = rounds * length, kept = first + length;
      const Window window{first, kept, kept - 1 + lookahead, Goal::progress};
      const Solved s = teccl::solve_window(state, window, true, options_);
      ++rounds;
      std::size_t sent = 0;
      for (const teccl::Flow& f : s.flows)
        if (f.epoch < kept) {
          state.add(f);
          ++sent;
        }
      optimal += s.status() == mip::Status::optimal;
      if (s.found()) worst_gap = std::max(worst_gap, s.gap());
      say(support::strprintf(
          "A* round %d (epochs %d-%d): %s (%d columns), %d deliveries to "
          "go, %.2f s",
          rounds, first, kept - 1, outcome(s).c_str(), s.columns, state.missing(), elapsed()));
      if (sent == 0 && state.missing() > 0) {
        // No solution within the time limit, or nothing worth sending: the greedy fills the
        // round so that the rounds still make progress.
        ++greedy_rounds;
        teccl::round_greedily(state, first, {}, kept);
      }
    }
    result.notes.push_back(
        support::strprintf("A*: %d rounds of %d epochs, arrivals counted %d epochs past each",
                           rounds, length, lookahead));
    if (greedy_rounds > 0)
      result.notes.push_back(support::strprintf(
          "%d round%s without a CBC solution in the time limit filled by the greedy", greedy_rounds,
          greedy_rounds == 1 ? "" : "s"));
    result.solver.solver = std::string("CBC ") + CBC_VERSION;
    result.solver.status = support::strprintf("%d of %d rounds optimal", optimal, rounds);
    result.solver.gap = worst_gap;
    return state;
  }

  void finish(const State& state, Synthesized& result) {
    const std::vector<schedule::EpochTransfer> transfers = teccl::transfers_of(state);
    schedule::EpochScheduleBuilder builder("teccl", topology_.name(), fabric_.ranks, chunks_);
    for (const schedule::EpochTransfer& t : transfers)
      if (const auto problem = builder.add(t))
        throw support::InputError(support::SourceLocation{"teccl", 0, 0, {}},
                                  "teccl: internal: " + *problem);
    result.schedule = builder.take();
    std::map<std::tuple<int, int, int, topology::LinkId>, int> fanout;
    for (const schedule::EpochTransfer& t : transfers)
      if (t.route.size() > 1) ++fanout[{t.sender, t.chunk, t.epoch, t.route.front()}];
    int extra = 0;
    for (const auto& [key, count] : fanout) extra += count - 1;
    const int epochs = state.last_arrival();
    result.notes.insert(
        result.notes.begin(),
        support::strprintf("%d epochs of one chunk over a %g GB/s link (the %s link), %d "
                           "chunk%s per GPU; %zu transfers",
                           epochs, fabric_.epoch_GBps,
                           *options_.teccl_epoch == TecclEpoch::fastest ? "fastest" : "slowest",
                           chunks_, chunks_ == 1 ? "" : "s", transfers.size()));
    if (extra > 0)
      result.notes.push_back(support::strprintf(
          "switch copies became one send per receiver: %d more sends than TE-CCL's switch "
          "multicast",
          extra));
    result.solver.seconds = elapsed();
    say(result.solver.summary());
  }

  const topology::Topology& topology_;
  const SynthesisOptions& options_;
  int chunks_;
  Fabric fabric_;
  std::chrono::steady_clock::time_point start_ = std::chrono::steady_clock::now();
};

}  // namespace

Synthesized teccl_synthesize(const topology::Topology& topology, support::Collective collective,
                             const SynthesisOptions& options) {
  if (collective != support::Collective::all_gather)
    throw support::UnsupportedError(support::UnsupportedError::Subject::collective,
                                    "teccl builds allgather only (TE-CCL's AllGather formulation)");
  if (topology.rank_count() < 2)
    throw support::InputError(support::SourceLocation{topology.name(), 0, 0, "gpus"},
                              "teccl needs at least two GPUs");
  if (options.teccl_chunks < 0)  // the caller's to check (the CLI: --teccl-chunks)
    throw std::invalid_argument("teccl: SynthesisOptions::teccl_chunks must be 0 or more");
  SynthesisOptions resolved = options;
  std::set<int> hosts;
  for (const topology::Node& node : topology.nodes())
    if (node.kind == topology::NodeKind::gpu) hosts.insert(node.host);
  const bool one_host = hosts.size() <= 1;
  if (!resolved.teccl_mode) resolved.teccl_mode = one_host ? TecclMode::milp : TecclMode::astar;
  if (!resolved.teccl_epoch)
    resolved.teccl_epoch = one_host ? TecclEpoch::fastest : TecclEpoch::slowest;
  return Synthesis(topology, resolved).run();
}

}  // namespace optiflow::baselines
