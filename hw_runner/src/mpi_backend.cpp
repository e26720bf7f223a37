// The MPI backend (mpi_backend.hpp): what the job driver asks of it, over MPI point-to-point.
#include "optiflow/hw_runner/mpi_backend.hpp"

#include <sched.h>
#include <time.h>
#include <unistd.h>

#include <algorithm>
#include <array>
#include <cstdlib>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "job_driver.hpp"
#include "mpi_support.hpp"
#include "optiflow/hw_runner/buffers.hpp"
#include "optiflow/hw_runner/executor.hpp"
#include "optiflow/schedule/flat_schedule.hpp"
#include "optiflow/support/error.hpp"
#include "optiflow/support/units.hpp"

namespace optiflow::hw_runner {
namespace {

using detail::check_mpi;
using detail::element_type;
using detail::MpiSession;
using detail::Watchdog;

/// Non-blocking MPI point-to-point on MPI_COMM_WORLD; the tag is the channel.
class MpiTransport final : public Transport {
 public:
  Handle send(std::int32_t peer, std::int32_t channel, const void* data,
              std::size_t bytes) override {
    const Handle handle = take();
    check_mpi(MPI_Isend(data, static_cast<int>(bytes), MPI_BYTE, peer, channel, MPI_COMM_WORLD,
                        &requests_[handle]),
              "MPI_Isend");
    return handle;
  }
  Handle recv(std::int32_t peer, std::int32_t channel, void* data, std::size_t bytes) override {
    const Handle handle = take();
    check_mpi(MPI_Irecv(data, static_cast<int>(bytes), MPI_BYTE, peer, channel, MPI_COMM_WORLD,
                        &requests_[handle]),
              "MPI_Irecv");
    return handle;
  }
  bool done(Handle handle) override {
    int flag = 0;
    check_mpi(MPI_Test(&requests_[handle], &flag, MPI_STATUS_IGNORE), "MPI_Test");
    if (flag) free_.push_back(handle);
    return flag != 0;
  }

 private:
  Handle take() {
    if (free_.empty()) {
      requests_.push_back(MPI_REQUEST_NULL);
      return requests_.size() - 1;
    }
    const Handle handle = free_.back();
    free_.pop_back();
    return handle;
  }
  std::vector<MPI_Request> requests_;
  std::vector<Handle> free_;
};

// The native collective: one blocking MPI call per execution, under the watchdog.
class MpiNative final : public detail::Execution {
 public:
  MpiNative(RankBuffers& buffers, Watchdog& watchdog, double timeout_s)
      : buffers_(buffers), watchdog_(watchdog), timeout_s_(timeout_s) {}
  void run_checked(const std::string& what) override { call(what); }
  void issue(const std::string& what) override { call(what); }

 private:
  void call(const std::string& what) {
    const BufferLayout& layout = buffers_.layout();
    const int own =
        static_cast<int>(static_cast<std::size_t>(layout.own_chunks) * layout.chunk_elems);
    const int all = static_cast<int>(static_cast<std::size_t>(layout.chunks) * layout.chunk_elems);
    Element* in = buffers_.input().data();
    Element* out = buffers_.output().data();
    watchdog_.arm(what, timeout_s_);
    // In place, the library is told so (MPI_IN_PLACE), as nccl-tests tells NCCL: it then skips
    // copying the rank's own data onto itself. Reduce-Scatter's in-place layouts differ (MPI
    // keeps the result at the start of the buffer, NCCL at the rank's slice), so it is not.
    const bool in_place = layout.inplace;
    if (layout.collective == support::Collective::all_gather && in_place)
      check_mpi(
          MPI_Allgather(MPI_IN_PLACE, 0, element_type(), out, own, element_type(), MPI_COMM_WORLD),
          "MPI_Allgather");
    else if (layout.collective == support::Collective::all_gather)
      check_mpi(MPI_Allgather(in, own, element_type(), out, own, element_type(), MPI_COMM_WORLD),
                "MPI_Allgather");
    else if (layout.collective == support::Collective::all_reduce && in_place)
      check_mpi(MPI_Allreduce(MPI_IN_PLACE, out, all, element_type(), MPI_SUM, MPI_COMM_WORLD),
                "MPI_Allreduce");
    else if (layout.collective == support::Collective::reduce_scatter)
      check_mpi(MPI_Reduce_scatter_block(in, out, own, element_type(), MPI_SUM, MPI_COMM_WORLD),
                "MPI_Reduce_scatter_block");
    else
      check_mpi(MPI_Allreduce(in, out, all, element_type(), MPI_SUM, MPI_COMM_WORLD),
                "MPI_Allreduce");
    watchdog_.disarm();
  }

  RankBuffers& buffers_;
  Watchdog& watchdog_;
  double timeout_s_;
};

// The backend: the schedule through a RankExecutor over MPI point-to-point, each execution
// complete when issue() returns; MPI_Wtime as the clock.
class MpiBackend final : public detail::Backend {
 public:
  MpiBackend(const MpiSession& session, Watchdog& watchdog, const schedule::Schedule& schedule,
             const RunOptions& options)
      : session_(session),
        watchdog_(watchdog),
        schedule_(schedule),
        options_(options),
        flat_(schedule) {}

  JobInfo start() override {
    const JobInfo job = detail::describe_job(session_, "mpi");
    oversubscribed_ = find_oversubscription();
    return job;
  }
  std::string native_name() const override {
    return mpi_native_name(schedule_.collective, options_.native_algorithm);
  }
  std::unique_ptr<detail::Execution> schedule(RankBuffers& buffers) override {
    return std::make_unique<ScheduleExecution>(*this, buffers);
  }
  std::unique_ptr<detail::Execution> native(RankBuffers& buffers) override {
    return std::make_unique<MpiNative>(buffers, watchdog_, options_.timeout_s);
  }
  void wait(const std::string&) override {}
  void start_clock() override { clock_start_ = MPI_Wtime(); }
  void stop_clock() override { clock_stop_ = MPI_Wtime(); }
  double elapsed_us() override { return support::us_of_seconds(clock_stop_ - clock_start_); }

 private:
  class ScheduleExecution final : public detail::Execution {
   public:
    ScheduleExecution(MpiBackend& backend, RankBuffers& buffers)
        : backend_(backend),
          executor_(backend.flat_, backend.session_.rank(), buffers, backend.transport_) {}
    void run_checked(const std::string& what) override { backend_.execute(executor_, what); }
    void issue(const std::string& what) override { backend_.execute(executor_, what); }

   private:
    MpiBackend& backend_;
    RankExecutor executor_;
  };

  void execute(RankExecutor& executor, const std::string& what) {
    // The executor's own deadline names the steps it waits on; the watchdog, a little later,
    // is for a rank stuck where it cannot look.
    watchdog_.arm(what, options_.timeout_s + 5);
    const double deadline = MPI_Wtime() + options_.timeout_s;
    executor.start();
    std::size_t idle_polls = 0, completed = 0;
    for (std::uint32_t polls = 1; !executor.progress(); ++polls) {
      if (polls % 64 == 0 && MPI_Wtime() > deadline)
        session_.abort_job(
            detail::timeout_message(options_.timeout_s, what) + ":\n" + executor.waiting_on(),
            kTimedOut);
      idle_polls = executor.steps_completed() == completed ? idle_polls + 1 : 0;
      completed = executor.steps_completed();
      wait_idle(idle_polls);
    }
    watchdog_.disarm();
  }

  // Spinning is fastest while every rank has a core; with more ranks than cores (mpirun
  // --oversubscribe) a rank that waits must give its core to the rank it waits for.
  void wait_idle(std::size_t idle_polls) const {
    if (!oversubscribed_ || idle_polls < 8) {
      sched_yield();
      return;
    }
    const timespec pause_for{0, 20'000};  // 20 us
    nanosleep(&pause_for, nullptr);
  }

  bool find_oversubscription() {
    const int local_ranks = detail::node_place(session_).ranks;
    const long cores = sysconf(_SC_NPROCESSORS_ONLN);
    return cores > 0 && local_ranks > cores;
  }

  const MpiSession& session_;
  Watchdog& watchdog_;
  const schedule::Schedule& schedule_;
  const RunOptions& options_;
  schedule::FlatSchedule flat_;
  MpiTransport transport_;
  bool oversubscribed_ = false;
  double clock_start_ = 0, clock_stop_ = 0;
};

// Open MPI 4.1's coll/tuned algorithms for the native collective of each schedule.
struct TunedCollective {
  const char* parameter;
  std::array<std::string_view, 6> algorithms;
};

const TunedCollective& tuned_collective(support::Collective collective) {
  static const TunedCollective all_gather{
      "coll_tuned_allgather_algorithm",
      {"linear", "bruck", "recursive_doubling", "ring", "neighbor", "two_proc"}};
  static const TunedCollective reduce_scatter{
      "coll_tuned_reduce_scatter_block_algorithm",
      {"basic_linear", "recursive_doubling", "recursive_halving", "butterfly"}};
  static const TunedCollective all_reduce{"coll_tuned_allreduce_algorithm",
                                          {"basic_linear", "nonoverlapping", "recursive_doubling",
                                           "ring", "segmented_ring", "rabenseifner"}};
  return collective == support::Collective::all_gather       ? all_gather
         : collective == support::Collective::reduce_scatter ? reduce_scatter
                                                             : all_reduce;
}

}  // namespace

std::string mpi_native_name(support::Collective collective, const std::string& algorithm) {
  const std::string name = collective == support::Collective::all_gather ? "MPI_Allgather"
                           : collective == support::Collective::reduce_scatter
                               ? "MPI_Reduce_scatter_block"
                               : "MPI_Allreduce";
  return algorithm.empty() ? name : name + " (" + algorithm + ")";
}

std::string open_mpi_algorithm(support::Collective collective, const std::string& algorithm) {
  const TunedCollective& tuned = tuned_collective(collective);
  std::string name = algorithm;
  std::ranges::replace(name, '-', '_');
  if (!name.empty() && std::ranges::find(tuned.algorithms, name) != tuned.algorithms.end())
    return name;
  std::string known;
  for (std::string_view a : tuned.algorithms)
    if (!a.empty()) known += (known.empty() ? "" : " | ") + std::string(a);
  throw support::InputError(support::SourceLocation{"command line", 0, 0, "--native-algorithm"},
                            "Open MPI has no " + mpi_native_name(collective) + " algorithm '" +
                                algorithm + "' (" + known + ")");
}

int run_mpi_job(const schedule::Schedule& schedule, const RunOptions& options,
                const Reporter& reporter) {
  // Open MPI reads its parameters from the environment in MPI_Init, on every rank however the
  // job was started (mpirun, srun).
  if (!options.native_algorithm.empty()) {
    const TunedCollective& tuned = tuned_collective(schedule.collective);
    setenv("OMPI_MCA_coll_tuned_use_dynamic_rules", "1", 1);
    setenv((std::string("OMPI_MCA_") + tuned.parameter).c_str(),
           open_mpi_algorithm(schedule.collective, options.native_algorithm).c_str(), 1);
  }
  MpiSession session;
  Watchdog watchdog(session);
  MpiBackend backend(session, watchdog, schedule, options);
  try {
    return detail::run_job(session, watchdog, schedule, options, backend, reporter);
  } catch (const std::exception& e) {
    session.abort_job(e.what(), 1);
  }
}

}  // namespace optiflow::hw_runner
