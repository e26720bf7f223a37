// The job driver of both backends (job_driver.hpp): nccl-tests' protocol, once.
#include "job_driver.hpp"

#include <unistd.h>

#include <algorithm>
#include <cstdlib>

#include "optiflow/support/sizes.hpp"

namespace optiflow::hw_runner::detail {
namespace {

// One rank's side of the job, for the lifetime of run_job.
class JobDriver {
 public:
  JobDriver(const MpiSession& session, Watchdog& watchdog, const schedule::Schedule& schedule,
            const RunOptions& options, Backend& backend)
      : session_(session),
        watchdog_(watchdog),
        schedule_(schedule),
        options_(options),
        backend_(backend) {}

  int run(const Reporter& reporter) {
    if (session_.size() != schedule_.ranks)
      session_.abort_job("the schedule has " + std::to_string(schedule_.ranks) +
                             " ranks but the job has " + std::to_string(session_.size()) +
                             " processes",
                         2);
    const JobInfo job = backend_.start();
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

 private:
  SizeResult measure_size(std::uint64_t size_bytes) {
    SizeResult result;
    result.size_bytes = size_bytes;
    result.elements = size_bytes / sizeof(Element);
    RankBuffers buffers(BufferLayout::of(schedule_, session_.rank(), size_bytes));
    buffers.fill();
    const std::unique_ptr<Execution> execution = backend_.schedule(buffers);
    inject_faults();
    result.schedule = measure(*execution, buffers, schedule_.name, "the checked execution at ",
                              "a timed execution at ", size_bytes);
    if (options_.native) {
      const std::string name = backend_.native_name();
      RankBuffers native(native_layout(buffers.layout()));
      native.fill();
      const std::unique_ptr<Execution> call = backend_.native(native);
      result.native = measure(*call, native, name, name + " at ", name + " at ", size_bytes);
    }
    return result;
  }

  // The checked run, the count of wrong elements over all ranks, and the time when none is.
  // `checked` and `iteration` name the runs in timeout messages, before the size.
  Measurement measure(Execution& execution, RankBuffers& buffers, const std::string& name,
                      const std::string& checked, const std::string& iteration,
                      std::uint64_t size_bytes) {
    const std::string size_text = support::format_size(size_bytes);
    execution.run_checked(checked + size_text);
    const std::uint64_t wrong = sum_over_ranks(buffers.count_wrong(), size_text);
    const double time_us = wrong == 0 ? timed(execution, iteration + size_text, size_text) : 0;
    return make_measurement(name, schedule_.collective, schedule_.ranks, size_bytes, time_us,
                            wrong);
  }

  /// nccl-tests: warm-up, barrier, timed iterations; the slowest rank's mean, on every rank.
  double timed(Execution& execution, const std::string& iteration, const std::string& size_text) {
    for (int i = 0; i < options_.warmup_iters; ++i) execution.issue(iteration);
    backend_.wait("the warm-up at " + size_text);
    barrier("the barrier before the timed iterations at " + size_text);
    backend_.start_clock();
    for (int i = 0; i < options_.iters; ++i) execution.issue(iteration);
    backend_.stop_clock();
    backend_.wait("the timed iterations at " + size_text);
    double mine_us = backend_.elapsed_us() / std::max(options_.iters, 1), slowest_us = 0;
    watchdog_.arm("the time reduction at " + size_text, options_.timeout_s);
    check_mpi(MPI_Allreduce(&mine_us, &slowest_us, 1, MPI_DOUBLE, MPI_MAX, MPI_COMM_WORLD),
              "MPI_Allreduce");
    watchdog_.disarm();
    return slowest_us;
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

  const MpiSession& session_;
  Watchdog& watchdog_;
  const schedule::Schedule& schedule_;
  const RunOptions& options_;
  Backend& backend_;
  bool hung_ = false;
};

}  // namespace

BufferLayout native_layout(BufferLayout layout) {
  layout.inplace = false;
  const bool gather = layout.collective == support::Collective::all_gather;
  const bool scatter = layout.collective == support::Collective::reduce_scatter;
  layout.input_chunks = gather ? layout.own_chunks : layout.chunks;
  layout.output_chunks = scatter ? layout.own_chunks : layout.chunks;
  layout.scratch_chunks = 0;
  return layout;
}

int run_job(const MpiSession& session, Watchdog& watchdog, const schedule::Schedule& schedule,
            const RunOptions& options, Backend& backend, const Reporter& reporter) {
  JobDriver driver(session, watchdog, schedule, options, backend);
  return driver.run(reporter);
}

}  // namespace optiflow::hw_runner::detail
