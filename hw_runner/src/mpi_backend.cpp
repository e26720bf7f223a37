#include "optiflow/hw_runner/mpi_backend.hpp"

#include <sched.h>
#include <time.h>
#include <unistd.h>

#include <cstdio>
#include <cstdlib>
#include <string>
#include <vector>

#include "mpi_support.hpp"
#include "optiflow/hw_runner/buffers.hpp"
#include "optiflow/hw_runner/executor.hpp"
#include "optiflow/schedule/flat_schedule.hpp"
#include "optiflow/support/sizes.hpp"

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

std::string seconds_text(double seconds) {
  char text[32];
  std::snprintf(text, sizeof text, "%g", seconds);
  return text;
}

class MpiJob {
 public:
  MpiJob(const schedule::Schedule& schedule, const RunOptions& options)
      : schedule_(schedule), options_(options), flat_(schedule), watchdog_(session_) {}

  int run(const Reporter& reporter) {
    try {
      return measure_all(reporter);
    } catch (const std::exception& e) {
      session_.abort_job(e.what(), 1);
    }
  }

 private:
  int measure_all(const Reporter& reporter) {
    if (session_.size() != schedule_.ranks)
      session_.abort_job("the schedule has " + std::to_string(schedule_.ranks) +
                             " ranks but the job has " + std::to_string(session_.size()) +
                             " processes (mpirun -np " + std::to_string(schedule_.ranks) + ")",
                         2);
    const JobInfo job = detail::describe_job(session_, "mpi");
    oversubscribed_ = find_oversubscription();
    if (session_.rank() == 0 && reporter.on_start) reporter.on_start(job);
    bool any_wrong = false;
    for (std::uint64_t requested : options_.sizes) {
      const SizeResult result = measure_size(round_size(schedule_, requested));
      any_wrong = any_wrong || result.schedule.wrong > 0 || result.native.wrong > 0;
      if (session_.rank() == 0 && reporter.on_size) reporter.on_size(result);
    }
    barrier("the final barrier");
    return any_wrong ? kWrongData : 0;
  }

  SizeResult measure_size(std::uint64_t size_bytes) {
    const std::string size_text = support::format_size(size_bytes);
    SizeResult result;
    result.size_bytes = size_bytes;
    result.elements = size_bytes / sizeof(Element);
    RankBuffers buffers(BufferLayout::of(schedule_, session_.rank(), size_bytes));
    RankExecutor executor(flat_, session_.rank(), buffers, transport_);

    buffers.fill();
    inject_faults();
    execute(executor, "the checked execution at " + size_text);
    const std::uint64_t wrong = sum_over_ranks(buffers.count_wrong(), size_text);
    double time_us = 0;
    if (wrong == 0)
      time_us = timed(size_text, [&] { execute(executor, "a timed execution at " + size_text); });
    result.schedule = make_measurement(schedule_.name, schedule_.collective, schedule_.ranks,
                                       size_bytes, time_us, wrong);
    if (options_.native) result.native = measure_native(size_bytes, buffers.layout());
    return result;
  }

  Measurement measure_native(std::uint64_t size_bytes, BufferLayout layout) {
    const std::string name = mpi_native_name(schedule_.collective);
    const std::string size_text = support::format_size(size_bytes);
    // Out of place: MPI's in-place Reduce_scatter_block leaves the result at the start of the
    // buffer, not at the rank's slice, so one layout serves all three.
    layout.inplace = false;
    const bool gather = layout.collective == support::Collective::all_gather;
    const bool scatter = layout.collective == support::Collective::reduce_scatter;
    layout.input_chunks = gather ? layout.own_chunks : layout.chunks;
    layout.output_chunks = scatter ? layout.own_chunks : layout.chunks;
    layout.scratch_chunks = 0;
    RankBuffers buffers(layout);
    const int own =
        static_cast<int>(static_cast<std::size_t>(layout.own_chunks) * layout.chunk_elems);
    const int all = static_cast<int>(static_cast<std::size_t>(layout.chunks) * layout.chunk_elems);
    auto call = [&] {
      Element* in = buffers.input().data();
      Element* out = buffers.output().data();
      watchdog_.arm(name + " at " + size_text, options_.timeout_s);
      if (gather)
        check_mpi(MPI_Allgather(in, own, element_type(), out, own, element_type(), MPI_COMM_WORLD),
                  "MPI_Allgather");
      else if (scatter)
        check_mpi(MPI_Reduce_scatter_block(in, out, own, element_type(), MPI_SUM, MPI_COMM_WORLD),
                  "MPI_Reduce_scatter_block");
      else
        check_mpi(MPI_Allreduce(in, out, all, element_type(), MPI_SUM, MPI_COMM_WORLD),
                  "MPI_Allreduce");
      watchdog_.disarm();
    };
    buffers.fill();
    call();
    const std::uint64_t wrong = sum_over_ranks(buffers.count_wrong(), size_text);
    const double time_us = wrong == 0 ? timed(size_text, call) : 0;
    return make_measurement(name, schedule_.collective, schedule_.ranks, size_bytes, time_us,
                            wrong);
  }

  /// nccl-tests: warm-up, barrier, timed iterations; the slowest rank's mean, on every rank.
  template <typename Body>
  double timed(const std::string& size_text, Body&& body) {
    for (int i = 0; i < options_.warmup_iters; ++i) body();
    barrier("the barrier before the timed iterations at " + size_text);
    const double start = MPI_Wtime();
    for (int i = 0; i < options_.iters; ++i) body();
    double mine_us = (MPI_Wtime() - start) * 1e6 / std::max(options_.iters, 1), slowest_us = 0;
    watchdog_.arm("the time reduction at " + size_text, options_.timeout_s);
    check_mpi(MPI_Allreduce(&mine_us, &slowest_us, 1, MPI_DOUBLE, MPI_MAX, MPI_COMM_WORLD),
              "MPI_Allreduce");
    watchdog_.disarm();
    return slowest_us;
  }

  void execute(RankExecutor& executor, const std::string& what) {
    // The executor's own deadline names the steps it waits on; the watchdog, a little later,
    // is for a rank stuck where it cannot look.
    watchdog_.arm(what, options_.timeout_s + 5);
    const double deadline = MPI_Wtime() + options_.timeout_s;
    executor.start();
    std::size_t idle_polls = 0, completed = 0;
    for (std::uint32_t polls = 1; !executor.progress(); ++polls) {
      if (polls % 64 == 0 && MPI_Wtime() > deadline)
        session_.abort_job("timed out after " + seconds_text(options_.timeout_s) + " s in " + what +
                               ":\n" + executor.waiting_on(),
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
    MPI_Comm node = MPI_COMM_NULL;
    check_mpi(MPI_Comm_split_type(MPI_COMM_WORLD, MPI_COMM_TYPE_SHARED, session_.rank(),
                                  MPI_INFO_NULL, &node),
              "MPI_Comm_split_type");
    int local_ranks = 1;
    MPI_Comm_size(node, &local_ranks);
    MPI_Comm_free(&node);
    const long cores = sysconf(_SC_NPROCESSORS_ONLN);
    return cores > 0 && local_ranks > cores;
  }

  void barrier(const std::string& what) {
    watchdog_.arm(what, options_.timeout_s);
    check_mpi(MPI_Barrier(MPI_COMM_WORLD), "MPI_Barrier");
    watchdog_.disarm();
  }

  std::uint64_t sum_over_ranks(std::uint64_t mine, const std::string& size_text) {
    unsigned long long local = mine, total = 0;
    watchdog_.arm("the data check's reduction at " + size_text, options_.timeout_s);
    check_mpi(MPI_Allreduce(&local, &total, 1, MPI_UNSIGNED_LONG_LONG, MPI_SUM, MPI_COMM_WORLD),
              "MPI_Allreduce");
    watchdog_.disarm();
    return total;
  }

  void inject_faults() {
    if (session_.rank() == options_.crash_rank) std::abort();
    if (session_.rank() == options_.hang_rank && !hung_) {
      hung_ = true;
      for (;;) pause();  // stuck for good, with no watchdog of its own: the others must notice
    }
  }

  const schedule::Schedule& schedule_;
  const RunOptions& options_;
  MpiSession session_;
  schedule::FlatSchedule flat_;
  Watchdog watchdog_;
  MpiTransport transport_;
  bool hung_ = false;
  bool oversubscribed_ = false;
};

}  // namespace

std::string mpi_native_name(support::Collective collective) {
  switch (collective) {
    case support::Collective::all_gather:
      return "MPI_Allgather";
    case support::Collective::reduce_scatter:
      return "MPI_Reduce_scatter_block";
    default:
      return "MPI_Allreduce";
  }
}

int run_mpi_job(const schedule::Schedule& schedule, const RunOptions& options,
                const Reporter& reporter) {
  MpiJob job(schedule, options);
  return job.run(reporter);
}

}  // namespace optiflow::hw_runner
