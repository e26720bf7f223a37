#include "optiflow/hw_runner/calibrate.hpp"

#include <Eigen/Dense>
#include <algorithm>
#include <cmath>
#include <string>

#include "calibration_pairs.hpp"
#include "optiflow/support/units.hpp"

namespace optiflow::hw_runner {

LinkFit fit_alpha_beta(std::span<const PairSample> samples) {
  Eigen::MatrixXd design(static_cast<Eigen::Index>(samples.size()), 2);
  Eigen::VectorXd times(static_cast<Eigen::Index>(samples.size()));
  for (std::size_t i = 0; i < samples.size(); ++i) {
    design(static_cast<Eigen::Index>(i), 0) = 1.0;
    design(static_cast<Eigen::Index>(i), 1) = static_cast<double>(samples[i].bytes);
    times(static_cast<Eigen::Index>(i)) = samples[i].time_us;
  }
  const Eigen::Vector2d x = design.colPivHouseholderQr().solve(times);
  LinkFit fit;
  fit.alpha_us = std::max(0.0, x(0));
  const double us_per_byte = x(1);
  fit.bw_GBps = us_per_byte > 0 ? support::GBps_of(1.0, us_per_byte) : 1e6;
  const Eigen::VectorXd residual = design * x - times;
  fit.rms_error_us =
      samples.empty() ? 0 : std::sqrt(residual.squaredNorm() / static_cast<double>(samples.size()));
  return fit;
}

namespace detail {

std::vector<PairSample> measure_pairs(const MpiSession& session, Watchdog& watchdog,
                                      const CalibrationOptions& options, double watchdog_grace_s,
                                      const PingPong& ping_pong) {
  const int rank = session.rank(), ranks = session.size();
  std::vector<PairSample> samples;
  for (int a = 0; a < ranks; ++a)
    for (int b = a + 1; b < ranks; ++b)
      for (std::uint64_t bytes : options.sizes) {
        const std::string what =
            "the ping-pong of ranks " + std::to_string(a) + " and " + std::to_string(b);
        watchdog.arm(what, options.timeout_s + watchdog_grace_s);
        check_mpi(MPI_Barrier(MPI_COMM_WORLD), "MPI_Barrier");
        double one_way_us = 0;
        if (rank == a || rank == b)
          one_way_us = ping_pong(rank == a ? b : a, rank == a, bytes, what);
        // Rank a's figure goes to rank 0.
        if (a != 0 && rank == a)
          check_mpi(MPI_Send(&one_way_us, 1, MPI_DOUBLE, 0, 1, MPI_COMM_WORLD), "MPI_Send");
        if (rank == 0) {
          if (a != 0)
            check_mpi(MPI_Recv(&one_way_us, 1, MPI_DOUBLE, a, 1, MPI_COMM_WORLD, MPI_STATUS_IGNORE),
                      "MPI_Recv");
          samples.push_back({a, b, bytes, one_way_us});
          samples.push_back({b, a, bytes, one_way_us});
        }
        watchdog.disarm();
      }
  return samples;
}

}  // namespace detail

namespace {

// Blocking MPI_Send/MPI_Recv round trips from host memory, timed with MPI_Wtime.
double mpi_ping_pong(std::vector<char>& buffer, const CalibrationOptions& options, int peer,
                     bool measuring, std::uint64_t bytes) {
  using detail::check_mpi;
  const int count = static_cast<int>(bytes);
  auto send = [&] {
    check_mpi(MPI_Send(buffer.data(), count, MPI_BYTE, peer, 0, MPI_COMM_WORLD), "MPI_Send");
  };
  auto receive = [&] {
    check_mpi(MPI_Recv(buffer.data(), count, MPI_BYTE, peer, 0, MPI_COMM_WORLD, MPI_STATUS_IGNORE),
              "MPI_Recv");
  };
  double start = 0;
  for (int i = 0; i < options.warmup_iters + options.iters; ++i) {
    if (i == options.warmup_iters) start = MPI_Wtime();
    if (measuring) {
      send();
      receive();
    } else {
      receive();
      send();
    }
  }
  return support::us_of_seconds(MPI_Wtime() - start) / (2.0 * std::max(options.iters, 1));
}

}  // namespace

std::vector<PairSample> run_mpi_calibration(const CalibrationOptions& options) {
  detail::MpiSession session;
  detail::Watchdog watchdog(session);
  std::vector<PairSample> samples;
  try {
    std::size_t largest = 1;
    for (std::uint64_t bytes : options.sizes) largest = std::max<std::size_t>(largest, bytes);
    std::vector<char> buffer(largest, 1);
    samples = detail::measure_pairs(
        session, watchdog, options, 0,
        [&](int peer, bool measuring, std::uint64_t bytes, const std::string&) {
          return mpi_ping_pong(buffer, options, peer, measuring, bytes);
        });
  } catch (const std::exception& e) {
    session.abort_job(e.what(), 1);
  }
  return samples;
}

}  // namespace optiflow::hw_runner
