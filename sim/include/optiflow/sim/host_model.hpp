// A machine model fitted to measured schedules (`optiflow calibrate --from-db`,
// docs/fidelity.md). Pairwise ping-pong sees each pair of ranks alone; when every rank moves
// data at once they share the host's memory system, and a runtime's costs change with the
// message size (MPI's eager and rendezvous transfers, the caches a copy fits in). The model
// says both, in a topology the simulator runs like any other:
//
//   rank r --send--> [host in] --memory--> [host out] --recv--> rank s
//
// Each rank has its own link into and out of its host's memory system, and every transfer
// crosses the memory link, which all ranks of the host share; a fixed cost per collective and
// per step, and an alpha and a bandwidth factor per message-size band. A rank's steps run on its
// one core (the MPI runner's progress loop): their overheads, and the alpha of each message they
// send or receive, queue there. Its figures are the machine's, not the ranks': fitted at one
// rank count, it predicts another.
#pragma once

#include <cstdint>
#include <functional>
#include <span>
#include <string>
#include <vector>

#include "optiflow/schedule/schedule.hpp"
#include "optiflow/topology/topology.hpp"

namespace optiflow::sim {

struct HostModel {
  double launch_us = 0;                      ///< once per collective
  double step_us = 0;                        ///< per step (the topology's op_overhead_us)
  double send_GBps = 0, recv_GBps = 0;       ///< one rank's link out of and into the memory system
  double memory_GBps = 0;                    ///< the host's memory system, shared by every transfer
  std::vector<topology::MessageBand> bands;  ///< ascending; the last holds every larger message

  /// The model as a topology of `ranks` ranks on one host.
  topology::Topology topology(int ranks, const std::string& name) const;
};

/// A stored schedule and what it measured at each size.
struct MeasuredSchedule {
  schedule::Schedule schedule;  ///< its routes are ignored: the model routes through the host
  std::vector<std::pair<std::uint64_t, double>> times_us;  ///< (size in bytes, measured time)
};

struct FitOptions {
  /// Upper edges of the message-size bands (bytes, ascending); one more band holds the rest.
  std::vector<std::uint64_t> band_edges{4096, 65536, 524288, 2097152};
  int max_iterations = 60;  ///< per descent (the fit starts four)
  /// Huber's threshold on log(simulated / measured): residuals beyond it weigh less, so that
  /// a run disturbed by the machine does not pull the fit.
  double huber = 0.15;
  unsigned threads = 0;  ///< simulation threads (0: all cores)
  /// Called after each iteration with its number and the robust cost.
  std::function<void(int, double)> progress;
};

/// One measured point and the fitted model's prediction of it.
struct FitResidual {
  std::string schedule;
  std::uint64_t size_bytes = 0;
  double measured_us = 0, simulated_us = 0;
};

struct FitReport {
  HostModel model;
  std::vector<FitResidual> residuals;        ///< in the order of the measurements
  int iterations = 0;                        ///< over every descent
  double median_error = 0, worst_error = 0;  ///< |simulated / measured - 1|
};

/// Fits the model to every measured point by robust nonlinear least squares on the log of
/// simulated over measured time: Levenberg-Marquardt over the log of each figure, the Jacobian
/// by finite differences of the simulator itself, Huber weights by iteratively reweighted
/// least squares. The descent starts from four points (fast and slow ranks, small and large fixed
/// cost) and the lowest cost wins, so that the valley found does not depend on which schedules
/// happen to be fitted. Throws support::InputError when there is nothing to fit.
FitReport fit_host_model(std::span<const MeasuredSchedule> measured, const FitOptions& options);

}  // namespace optiflow::sim
