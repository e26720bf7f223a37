// TACCL's scheduling stage (taccl/scheduler.py, TACCLScheduler._encode): with the routes and the
// orders fixed, a MILP sets every send's time and decides which chunks go over an inter-node link
// together (contiguity: one alpha for the group, beta per chunk), minimising the makespan.
//
// As in TACCL: chunks at most 6 places apart on a relay link may be sent together, a chunk
// joins a group only if the chunk before it did, chunks on a remote switch are grouped only
// where no other GPU's transfer comes between them, and every other pair of transfers on a link
// or a switch keeps the heuristic's order. Indicator constraints are big-M rows.
#include <algorithm>
#include <map>

#include "mip.hpp"
#include "optiflow/support/error.hpp"
#include "optiflow/support/strings.hpp"
#include "taccl_internal.hpp"

namespace optiflow::baselines::taccl {
namespace {

using mip::Expr;

constexpr int kMaxContiguous = 6;  // scheduler.py: max_contig

class ScheduleModel {
 public:
  ScheduleModel(const LogicalTopology& logical, const ChunkSpace& space, const Routing& routing,
                const Ordering& ordering)
      : logical_(logical), space_(space), routing_(routing), ordering_(ordering) {
    double total = 0;
    for (std::size_t e = 0; e < logical.links.size(); ++e)
      total += logical.links[e].cost * static_cast<double>(ordering.on_link[e].size());
    horizon_ = total + 1;
    big_m_ = 2 * horizon_;
  }

  mip::Solution solve(const SynthesisOptions& options, StageReport& report, Schedule& schedule) {
    make_columns();
    decide_groupable();
    add_rows();
    report.columns = mip_.columns();
    report.rows = mip_.rows();
    report.integers = mip_.integers();
    if (options.progress)
      options.progress(support::strprintf(
          "taccl: scheduling MILP: %d columns (%d binary: sends that may go together), %d rows",
          report.columns, report.integers, report.rows));
    mip::Solution result = solve_stage(mip_, options, report);
    if (result.found()) extract(result, schedule);
    return result;
  }

 private:
  const LogicalLink& link(int e) const { return logical_.links[static_cast<std::size_t>(e)]; }

  void make_columns() {
    time_ = mip_.add_column(0, horizon_, 1.0, false);
    for (std::size_t e = 0; e < logical_.links.size(); ++e)
      for (int c : ordering_.on_link[e])
        send_[{c, static_cast<int>(e)}] = mip_.add_column(0, horizon_, 0, false);
    for (int c = 0; c < space_.chunks(); ++c)
      for (int r = 0; r < logical_.ranks; ++r)
        if (r != space_.owner(c)) start_[{c, r}] = mip_.add_column(0, horizon_, 0, false);
  }

  Expr send(int c, int e) const { return Expr::var(send_.at({c, e})); }
  Expr start(int c, int r) const {
    if (r == space_.owner(c)) return Expr();
    return Expr::var(start_.at({c, r}));
  }

  // For a transfer on a switch: the next transfer on it that uses another of its links
  // (utils.py add_switch_order: recv_right_after / send_right_after).
  std::map<std::pair<int, int>, std::pair<int, int>> next_other(std::size_t h) const {
    std::map<std::pair<int, int>, std::pair<int, int>> after;
    const auto& order = ordering_.on_switch[h];
    for (std::size_t i = 0; i < order.size(); ++i) {
      std::pair<int, int> found{-1, -1};
      for (std::size_t j = i + 1; j < order.size(); ++j)
        if (order[j].second != order[i].second) {
          found = order[j];
          break;
        }
      after[order[i]] = found;
    }
    return after;
  }

  // Which pairs on a relay link get a together binary (_add_chunk_order).
  void decide_groupable() {
    std::vector<std::map<std::pair<int, int>, std::pair<int, int>>> after;
    for (std::size_t h = 0; h < logical_.switches.size(); ++h) after.push_back(next_other(h));
    for (std::size_t e = 0; e < logical_.links.size(); ++e) {
      const LogicalLink& l = logical_.links[e];
      if (!l.remote) continue;
      const auto& order = ordering_.on_link[e];
      std::vector<std::size_t> remote_switches;
      for (std::size_t h = 0; h < logical_.switches.size(); ++h) {
        const auto& links = logical_.switches[h].links;
        if (logical_.switches[h].remote &&
            std::find(links.begin(), links.end(), static_cast<int>(e)) != links.end())
          remote_switches.push_back(h);
      }
      for (std::size_t i = 0; i < order.size(); ++i)
        for (std::size_t j = i + 1; j < order.size() && j - i < kMaxContiguous; ++j) {
          const int c = order[i], o = order[j];
          bool interleaved = false;
          for (std::size_t h : remote_switches)
            interleaved = interleaved || after[h].at({c, static_cast<int>(e)}) !=
                                             after[h].at({o, static_cast<int>(e)});
          if (interleaved) continue;
          together_[{static_cast<int>(e), c, o}] = mip_.add_binary();
        }
    }
  }

  Expr together(int e, int c, int o) const {
    if (auto it = together_.find({e, c, o}); it != together_.end()) return Expr::var(it->second);
    if (auto it = together_.find({e, o, c}); it != together_.end()) return Expr::var(it->second);
    return Expr();
  }

  // calc_latency: alpha + beta per chunk of the group on a relay link; the invbw elsewhere.
  Expr latency(int c, int e) const {
    const LogicalLink& l = link(e);
    if (!l.remote) return Expr(l.cost);
    Expr lat(l.alpha + l.beta);
    for (int o : ordering_.on_link[static_cast<std::size_t>(e)])
      if (o != c) lat += l.beta * together(e, c, o);
    return lat;
  }

  void add_rows() {
    const Expr time = Expr::var(time_);
    for (std::size_t ue = 0; ue < logical_.links.size(); ++ue) {
      const int e = static_cast<int>(ue);
      const LogicalLink& l = link(e);
      const auto& order = ordering_.on_link[ue];
      for (int c : order) {
        mip_.equal(start(c, l.dst), send(c, e) + latency(c, e));
        mip_.less_equal(start(c, l.src), send(c, e));
        mip_.less_equal(start(c, l.dst), time);
      }
      // Inside a node nothing goes together: each transfer after the one before it is the
      // same as after every earlier one.
      for (std::size_t i = 0; i < order.size(); ++i)
        for (std::size_t j = i + 1; j < (l.remote ? order.size() : std::min(order.size(), i + 2));
             ++j) {
          const int c = order[i], o = order[j];
          const Expr t = together(e, c, o);
          if (t.terms.empty()) {
            mip_.less_equal(send(c, e) + latency(c, e), send(o, e));
            continue;
          }
          // A chunk joins a group only if the one before it did.
          if (j - 1 > i) mip_.less_equal(t, together(e, c, order[j - 1]));
          // together -> same send and arrival time; else c before o.
          mip_.less_equal(send(c, e) - send(o, e), big_m_ - big_m_ * t);
          mip_.less_equal(send(o, e) - send(c, e), big_m_ - big_m_ * t);
          mip_.less_equal(start(c, l.dst) - start(o, l.dst), big_m_ - big_m_ * t);
          mip_.less_equal(start(o, l.dst) - start(c, l.dst), big_m_ - big_m_ * t);
          mip_.less_equal(send(c, e) + latency(c, e), send(o, e) + big_m_ * t);
        }
    }
    // Transfers on different links of one switch keep the heuristic's order. A switch inside a
    // node needs only consecutive pairs: its order agrees with its links' orders, in which
    // nothing goes together, so the chain implies every pair TACCL writes.
    for (std::size_t h = 0; h < logical_.switches.size(); ++h) {
      const auto& order = ordering_.on_switch[h];
      const bool chain = !logical_.switches[h].remote;
      for (std::size_t i = 0; i < order.size(); ++i)
        for (std::size_t j = i + 1; j < (chain ? std::min(order.size(), i + 2) : order.size());
             ++j) {
          const auto [c, e] = order[i];
          const auto [o, f] = order[j];
          if (e == f && !chain) continue;
          mip_.less_equal(send(c, e) + latency(c, e), send(o, f));
        }
    }
  }

  void extract(const mip::Solution& result, Schedule& schedule) const {
    auto value = [&](const Expr& e) {
      double v = e.constant;
      for (const auto& [col, coef] : e.terms)
        v += coef * result.values[static_cast<std::size_t>(col)];
      return v;
    };
    const auto chunks = static_cast<std::size_t>(space_.chunks());
    schedule.send_time.assign(chunks, std::vector<double>(logical_.links.size(), 0));
    schedule.groups.assign(logical_.links.size(), {});
    for (std::size_t ue = 0; ue < logical_.links.size(); ++ue) {
      const int e = static_cast<int>(ue);
      const auto& order = ordering_.on_link[ue];
      for (int c : order) schedule.send_time[static_cast<std::size_t>(c)][ue] = value(send(c, e));
      std::vector<char> grouped(order.size(), 0);
      for (std::size_t i = 0; i < order.size(); ++i) {
        if (grouped[i]) continue;
        std::vector<int> group{order[i]};
        for (std::size_t j = i + 1; j < order.size(); ++j)
          if (!grouped[j] && value(together(e, order[i], order[j])) > 0.5) {
            group.push_back(order[j]);
            grouped[j] = 1;
          }
        schedule.groups[ue].push_back(std::move(group));
      }
    }
  }

  const LogicalTopology& logical_;
  const ChunkSpace& space_;
  const Routing& routing_;
  const Ordering& ordering_;
  double horizon_ = 0, big_m_ = 0;
  int time_ = -1;
  std::map<std::pair<int, int>, int> send_, start_;
  std::map<std::tuple<int, int, int>, int> together_;
  mip::Model mip_{/*merge_identical_rows=*/true};
};

}  // namespace

Schedule solve_schedule(const LogicalTopology& logical, const ChunkSpace& space,
                        const Routing& routing, const Ordering& ordering,
                        const SynthesisOptions& options) {
  Schedule schedule;
  schedule.report.name = "scheduling";
  ScheduleModel model(logical, space, routing, ordering);
  const mip::Solution result = model.solve(options, schedule.report, schedule);
  if (!result.found())
    throw support::InputError(support::SourceLocation{"taccl", 0, 0, {}},
                              "taccl: the scheduling MILP found no solution (" +
                                  schedule.report.status + "); raise the time limit");
  return schedule;
}

}  // namespace optiflow::baselines::taccl
