#include "optiflow/sim/host_model.hpp"

#include <Eigen/Dense>
#include <algorithm>
#include <array>
#include <cmath>
#include <limits>
#include <map>

#include "optiflow/sim/fidelity.hpp"
#include "optiflow/sim/simulator.hpp"
#include "optiflow/support/error.hpp"

namespace optiflow::sim {

topology::Topology HostModel::topology(int ranks, const std::string& name) const {
  using topology::LinkKind;
  using topology::LinkSpec;
  using topology::NodeKind;
  topology::Topology topo(name);
  topo.set_op_overhead_us(step_us);
  topo.set_runtime(topology::RuntimeCosts{launch_us, bands, true});
  for (int r = 0; r < ranks; ++r)
    topo.add_node(topology::Node{"g" + std::to_string(r), NodeKind::gpu, r, 0, r});
  const auto in = topo.add_node(topology::Node{"host0.in", NodeKind::cpu, -1, 0, -1});
  const auto out = topo.add_node(topology::Node{"host0.out", NodeKind::cpu, -1, 0, -1});
  topo.add_link(in, out, LinkSpec{LinkKind::cpu, memory_GBps, 0});
  for (int r = 0; r < ranks; ++r) {
    const auto rank = topo.gpu_of_rank(r);
    topo.add_link(rank, in, LinkSpec{LinkKind::cpu, send_GBps, 0});
    topo.add_link(out, rank, LinkSpec{LinkKind::cpu, recv_GBps, 0});
  }
  return topo;
}

namespace {

// The figures the fit moves, as logs (every figure is positive, and relative steps suit
// figures that differ by orders of magnitude): launch, step, send, recv, memory, then each
// band's alpha, then each band's bandwidth factor but the first's. Bandwidths and factors
// trade off exactly (every link x c, every factor / c), so the first factor stays 1 and the
// factors are scaled to at most 1 at the end.
class Parameters {
 public:
  explicit Parameters(std::vector<std::uint64_t> edges) : edges_(std::move(edges)) {}

  Eigen::Index size() const { return kFigures + 2 * bands() - 1; }
  Eigen::Index bands() const { return static_cast<Eigen::Index>(edges_.size()) + 1; }

  /// Where the descent starts: a host whose ranks copy at `rank_GBps` out of and into a
  /// memory system of 20 GB/s, `launch_us` per collective, 1 us per step, no band penalties.
  Eigen::VectorXd start(double launch_us, double rank_GBps) const {
    Eigen::VectorXd x = Eigen::VectorXd::Zero(size());
    x.head(kFigures) << std::log(launch_us), std::log(1.0), std::log(rank_GBps),
        std::log(rank_GBps), std::log(20.0);
    return x;
  }

  HostModel model(const Eigen::VectorXd& x) const {
    HostModel m;
    m.launch_us = std::exp(x(0));
    m.step_us = std::exp(x(1));
    m.send_GBps = std::exp(x(2));
    m.recv_GBps = std::exp(x(3));
    m.memory_GBps = std::exp(x(4));
    for (Eigen::Index b = 0; b < bands(); ++b) {
      const auto edge = b < bands() - 1 ? edges_[static_cast<std::size_t>(b)] : 0;
      const double factor = b == 0 ? 1.0 : std::exp(x(factor_index(b)));
      m.bands.push_back(topology::MessageBand{edge, std::exp(x(alpha_index(b))), factor});
    }
    return m;
  }

  /// Figures below a thousandth (of a microsecond, a GB/s, a share) are noise the logs should
  /// not chase, and above 10^5 are ones the data cannot see (a band no message falls in): both
  /// would leave the simulator with a zero or an infinite cost.
  void clamp(Eigen::VectorXd& x) const { x = x.cwiseMax(std::log(1e-3)).cwiseMin(std::log(1e5)); }

 private:
  static constexpr Eigen::Index kFigures = 5;
  Eigen::Index alpha_index(Eigen::Index band) const { return kFigures + band; }
  Eigen::Index factor_index(Eigen::Index band) const { return kFigures + bands() + band - 1; }

  std::vector<std::uint64_t> edges_;
};

// The factors scaled to at most 1, the links' bandwidths up by as much: the same machine.
HostModel normalised(HostModel m) {
  double top = 0;
  for (const auto& band : m.bands) top = std::max(top, band.bw_factor);
  for (auto& band : m.bands) band.bw_factor /= top;
  m.send_GBps *= top;
  m.recv_GBps *= top;
  m.memory_GBps *= top;
  return m;
}

class Problem {
 public:
  Problem(std::span<const MeasuredSchedule> measured, const FitOptions& options)
      : options_(options) {
    schedules_.reserve(measured.size());  // the candidates point into it
    for (const MeasuredSchedule& m : measured) {
      Candidate& candidate = by_ranks_[m.schedule.ranks].emplace_back();
      candidate.schedule = &schedules_.emplace_back(schedule::without_routes(m.schedule));
      for (const auto& [size, time] : m.times_us) {
        candidate.sizes.push_back(size);
        measured_.push_back(time);
      }
      order_.emplace_back(m.schedule.ranks, by_ranks_[m.schedule.ranks].size() - 1);
    }
  }

  std::size_t points() const { return measured_.size(); }

  /// The simulated time of every point, in the order of the measurements.
  std::vector<double> simulate(const HostModel& model) const {
    std::map<int, std::vector<std::vector<SimResult>>> results;
    for (const auto& [ranks, candidates] : by_ranks_) {
      const topology::Topology topo = model.topology(ranks, "fit");
      results[ranks] = simulate_all(topo, candidates, SimOptions{}, options_.threads);
    }
    std::vector<double> times;
    for (const auto& [ranks, index] : order_)
      for (const SimResult& r : results[ranks][index]) times.push_back(r.time_us);
    return times;
  }

  Eigen::VectorXd log_residuals(const HostModel& model) const {
    const std::vector<double> times = simulate(model);
    Eigen::VectorXd r(static_cast<Eigen::Index>(times.size()));
    for (std::size_t i = 0; i < times.size(); ++i)
      r(static_cast<Eigen::Index>(i)) = std::log(times[i] / measured_[i]);
    return r;
  }

  double huber_cost(const Eigen::VectorXd& r) const {
    const double d = options_.huber;
    double cost = 0;
    for (double v : r) cost += std::abs(v) <= d ? v * v / 2 : d * (std::abs(v) - d / 2);
    return cost;
  }

  Eigen::VectorXd huber_weights(const Eigen::VectorXd& r) const {
    return r.unaryExpr(
        [d = options_.huber](double v) { return std::abs(v) <= d ? 1.0 : d / std::abs(v); });
  }

 private:
  const FitOptions& options_;
  std::vector<schedule::Schedule> schedules_;
  std::map<int, std::vector<Candidate>> by_ranks_;
  std::vector<std::pair<int, std::size_t>> order_;  // per measured schedule: its candidate
  std::vector<double> measured_;
};

// One Levenberg-Marquardt step from x: the Jacobian of the log residuals by forward
// differences, the Huber weights of the residuals at x, the damped normal equations.
struct Step {
  Eigen::MatrixXd jtj;
  Eigen::VectorXd jtr;
};

Step linearise(const Problem& problem, const Parameters& params, const Eigen::VectorXd& x,
               const Eigen::VectorXd& r) {
  constexpr double h = 0.01;  // 1% of each figure: past the simulator's kinks, below its curve
  Eigen::MatrixXd jacobian(r.size(), x.size());
  for (Eigen::Index k = 0; k < x.size(); ++k) {
    Eigen::VectorXd moved = x;
    moved(k) += h;
    jacobian.col(k) = (problem.log_residuals(params.model(moved)) - r) / h;
  }
  const Eigen::VectorXd w = problem.huber_weights(r);
  return {jacobian.transpose() * w.asDiagonal() * jacobian,
          jacobian.transpose() * w.asDiagonal() * r};
}

struct Descent {
  Eigen::VectorXd x;
  double cost = 0;
  int iterations = 0;
};

// Levenberg-Marquardt on the Huber-weighted log residuals from x (iteratively reweighted:
// the weights are those of the current residuals).
Descent descend(const Problem& problem, const Parameters& params, const Eigen::VectorXd& start,
                const FitOptions& options, int first_iteration) {
  // A figure the data cannot see (a band no message falls in) has no gradient, and round-off
  // would move it anywhere; a faint pull towards the start keeps it there and moves the others
  // by less than the fit can tell.
  constexpr double kRidge = 1e-4;
  auto cost = [&](const Eigen::VectorXd& x, const Eigen::VectorXd& r) {
    return problem.huber_cost(r) + kRidge / 2 * (x - start).squaredNorm();
  };
  Eigen::VectorXd r = problem.log_residuals(params.model(start));
  Descent d{start, cost(start, r), 0};
  double lambda = 1e-2;
  bool converged = false;
  while (d.iterations < options.max_iterations && !converged) {
    ++d.iterations;
    Step step = linearise(problem, params, d.x, r);
    step.jtj.diagonal().array() += kRidge;
    step.jtr += kRidge * (d.x - start);
    bool improved = false;
    while (lambda < 1e8 && !improved) {
      Eigen::MatrixXd damped = step.jtj;
      damped.diagonal() += lambda * step.jtj.diagonal();
      Eigen::VectorXd next = d.x - damped.ldlt().solve(step.jtr);
      params.clamp(next);
      const Eigen::VectorXd next_r = problem.log_residuals(params.model(next));
      const double next_cost = cost(next, next_r);
      if (next_cost < d.cost) {
        improved = true;
        converged = (d.cost - next_cost) / d.cost < 1e-5;
        d.x = next;
        r = next_r;
        d.cost = next_cost;
        lambda = std::max(lambda / 3, 1e-7);
      } else {
        lambda *= 4;
      }
    }
    if (options.progress) options.progress(first_iteration + d.iterations, d.cost);
    converged = converged || !improved;
  }
  return d;
}

}  // namespace

FitReport fit_host_model(std::span<const MeasuredSchedule> measured, const FitOptions& options) {
  const Problem problem(measured, options);
  if (problem.points() == 0)
    throw support::InputError(support::SourceLocation{"calibrate", 0, 0, "from_db"},
                              "no measured schedule to fit the machine to");
  const Parameters params(options.band_edges);
  // The cost has more than one valley (fast ranks behind a slow memory system, or slow ranks
  // and a large fixed cost), and which one a single descent finds depends on where it starts
  // and on which schedules are fitted. Every start is tried; the lowest cost wins.
  constexpr std::array<std::pair<double, double>, 4> starts{
      {{5.0, 10.0}, {5.0, 50.0}, {15.0, 10.0}, {15.0, 50.0}}};
  FitReport report;
  Descent best{.x = {}, .cost = std::numeric_limits<double>::infinity(), .iterations = 0};
  for (const auto& [launch_us, rank_GBps] : starts) {
    Descent d =
        descend(problem, params, params.start(launch_us, rank_GBps), options, report.iterations);
    report.iterations += d.iterations;
    if (d.cost < best.cost) best = std::move(d);
  }
  report.model = normalised(params.model(best.x));
  const std::vector<double> simulated = problem.simulate(report.model);
  std::vector<double> errors;
  std::size_t i = 0;
  for (const MeasuredSchedule& m : measured)
    for (const auto& [size, time] : m.times_us) {
      report.residuals.push_back({m.schedule.name, size, time, simulated[i]});
      errors.push_back(std::abs(simulated[i] / time - 1));
      ++i;
    }
  report.median_error = median(errors);
  report.worst_error = errors.empty() ? 0 : std::ranges::max(errors);
  return report;
}

}  // namespace optiflow::sim
