#include "optiflow/hw_runner/calibrate.hpp"

#include <Eigen/Dense>
#include <algorithm>
#include <cmath>
#include <string>

#include "mpi_support.hpp"

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
  fit.bw_GBps = us_per_byte > 0 ? 1.0 / (us_per_byte * 1e3) : 1e6;
  const Eigen::VectorXd residual = design * x - times;
  fit.rms_error_us =
      samples.empty() ? 0 : std::sqrt(residual.squaredNorm() / static_cast<double>(samples.size()));
  return fit;
}

std::vector<PairSample> run_mpi_calibration(const CalibrationOptions& options) {
  using detail::check_mpi;
  detail::MpiSession session;
  detail::Watchdog watchdog(session);
  std::vector<PairSample> samples;
  try {
    const int rank = session.rank(), ranks = session.size();
    std::size_t largest = 1;
    for (std::uint64_t bytes : options.sizes) largest = std::max<std::size_t>(largest, bytes);
    std::vector<char> buffer(largest, 1);
    for (int a = 0; a < ranks; ++a)
      for (int b = a + 1; b < ranks; ++b)
        for (std::uint64_t bytes : options.sizes) {
          watchdog.arm("the ping-pong of ranks " + std::to_string(a) + " and " + std::to_string(b),
                       options.timeout_s);
          check_mpi(MPI_Barrier(MPI_COMM_WORLD), "MPI_Barrier");
          double one_way_us = 0;
          const int count = static_cast<int>(bytes);
          if (rank == a || rank == b) {
            const int peer = rank == a ? b : a;
            double start = 0;
            for (int i = 0; i < options.warmup_iters + options.iters; ++i) {
              if (i == options.warmup_iters) start = MPI_Wtime();
              if (rank == a) {
                check_mpi(MPI_Send(buffer.data(), count, MPI_BYTE, peer, 0, MPI_COMM_WORLD),
                          "MPI_Send");
                check_mpi(MPI_Recv(buffer.data(), count, MPI_BYTE, peer, 0, MPI_COMM_WORLD,
                                   MPI_STATUS_IGNORE),
                          "MPI_Recv");
              } else {
                check_mpi(MPI_Recv(buffer.data(), count, MPI_BYTE, peer, 0, MPI_COMM_WORLD,
                                   MPI_STATUS_IGNORE),
                          "MPI_Recv");
                check_mpi(MPI_Send(buffer.data(), count, MPI_BYTE, peer, 0, MPI_COMM_WORLD),
                          "MPI_Send");
              }
            }
            one_way_us = (MPI_Wtime() - start) * 1e6 / (2.0 * std::max(options.iters, 1));
          }
          // Rank a's figure goes to rank 0.
          if (a != 0 && rank == a)
            check_mpi(MPI_Send(&one_way_us, 1, MPI_DOUBLE, 0, 1, MPI_COMM_WORLD), "MPI_Send");
          if (rank == 0) {
            if (a != 0)
              check_mpi(
                  MPI_Recv(&one_way_us, 1, MPI_DOUBLE, a, 1, MPI_COMM_WORLD, MPI_STATUS_IGNORE),
                  "MPI_Recv");
            samples.push_back({a, b, bytes, one_way_us});
            samples.push_back({b, a, bytes, one_way_us});
          }
          watchdog.disarm();
        }
  } catch (const std::exception& e) {
    session.abort_job(e.what(), 1);
  }
  return samples;
}

}  // namespace optiflow::hw_runner
