// The job driver both backends share: the size loop, the native collective's buffer layout, the
// data check, warm-up and timed iterations, the barriers, the reductions over ranks under the
// watchdog, and fault injection. A backend supplies only how it issues an execution (of the
// schedule, or of its library's own collective), waits for it, and times it. Internal.
#pragma once

#include <memory>
#include <string>

#include "mpi_support.hpp"
#include "optiflow/hw_runner/buffers.hpp"
#include "optiflow/hw_runner/measure.hpp"
#include "optiflow/schedule/schedule.hpp"

namespace optiflow::hw_runner::detail {

/// One collective at one size on this rank, on host buffers the driver filled with the pattern.
class Execution {
 public:
  virtual ~Execution() = default;
  /// Runs it once and waits for it; then the host buffers hold what it produced (to be checked).
  /// `what` names it in a timeout message.
  virtual void run_checked(const std::string& what) = 0;
  /// Issues one warm-up or timed iteration; it may still be running when this returns.
  virtual void issue(const std::string& what) = 0;
};

/// How one backend runs things; every call is made on every rank, in the same order.
class Backend {
 public:
  virtual ~Backend() = default;
  /// Sets the backend up for the job (communicator, stream, ...) and describes it.
  virtual JobInfo start() = 0;
  /// The library's own collective for the schedule's ("MPI_Allgather", "ncclAllGather", ...).
  virtual std::string native_name() const = 0;
  /// The schedule on `buffers`; `buffers` must outlive it.
  virtual std::unique_ptr<Execution> schedule(RankBuffers& buffers) = 0;
  /// The native collective on `buffers` (the driver's out-of-place layout, see native_layout).
  virtual std::unique_ptr<Execution> native(RankBuffers& buffers) = 0;
  /// Waits until every issued iteration has completed (aborting the job past the timeout).
  virtual void wait(const std::string& what) = 0;
  /// Marks the start and the end of the timed iterations, which may still be in flight.
  virtual void start_clock() = 0;
  virtual void stop_clock() = 0;
  /// Microseconds between the two marks, once wait() has returned.
  virtual double elapsed_us() = 0;
};

/// The native collective's buffers, out of place: MPI's in-place Reduce_scatter_block leaves
/// the result at the start of the buffer, not at the rank's slice, so one layout serves every
/// library and collective. `schedule` is the schedule's layout at the same size.
BufferLayout native_layout(BufferLayout schedule);

/// Runs the job on this rank with `backend` (the same status on every rank: 0, or kWrongData
/// when some size produced wrong data); `reporter` is called on rank 0. Throws what the backend
/// throws; aborts the job when the job's processes are not the schedule's ranks.
int run_job(const MpiSession& session, Watchdog& watchdog, const schedule::Schedule& schedule,
            const RunOptions& options, Backend& backend, const Reporter& reporter);

}  // namespace optiflow::hw_runner::detail
