// The NCCL backend (built only where CUDA and NCCL are found): MPI starts the ranks and
// carries NCCL's unique id; each rank drives one GPU through the schedule's level plan.
#include "optiflow/hw_runner/nccl_backend.hpp"

#include <cuda_runtime.h>
#include <nccl.h>
#include <sched.h>

#include <algorithm>
#include <array>
#include <cstdio>
#include <functional>
#include <optional>
#include <string>
#include <vector>

#include "calibration_pairs.hpp"
#include "mpi_support.hpp"
#include "nccl_kernels.hpp"
#include "optiflow/hw_runner/buffers.hpp"
#include "optiflow/hw_runner/level_plan.hpp"
#include "optiflow/support/sizes.hpp"

namespace optiflow::hw_runner {
namespace {

using detail::check_mpi;
using detail::MpiSession;
using detail::Watchdog;
using schedule::BufferKind;
using schedule::StepId;
using schedule::StepKind;

void check_cuda(cudaError_t code, const char* call) {
  if (code != cudaSuccess)
    throw std::runtime_error(std::string(call) + " failed: " + cudaGetErrorString(code) +
                             " (CUDA error " + std::to_string(static_cast<int>(code)) + ")");
}

void check_nccl(ncclResult_t code, const char* call) {
  if (code != ncclSuccess)
    throw std::runtime_error(std::string(call) + " failed: " + ncclGetErrorString(code) +
                             " (NCCL error " + std::to_string(static_cast<int>(code)) + ")");
}

std::string nccl_version_text() {
  int version = 0;
  ncclGetVersion(&version);
  int runtime = 0;
  cudaRuntimeGetVersion(&runtime);
  return "NCCL " + std::to_string(version / 10000) + "." + std::to_string(version / 100 % 100) +
         "." + std::to_string(version % 100) + ", CUDA runtime " + std::to_string(runtime / 1000) +
         "." + std::to_string(runtime / 10 % 100);
}

// Every rank agrees: a job where one rank has no GPU is skipped as a whole. Returns the device
// of this rank (its rank on its node, modulo the node's GPUs), set current; none on every rank
// when some rank has no GPU.
std::optional<int> find_device(const MpiSession& session) {
  int count = 0;
  const cudaError_t found = cudaGetDeviceCount(&count);
  int usable = found == cudaSuccess && count > 0 ? 1 : 0, all_usable = 0;
  check_mpi(MPI_Allreduce(&usable, &all_usable, 1, MPI_INT, MPI_MIN, MPI_COMM_WORLD),
            "MPI_Allreduce");
  if (!usable)
    std::fprintf(stderr, "optiflow run: rank %d (host %s): no GPU: %s\n", session.rank(),
                 session.host().c_str(),
                 found == cudaSuccess ? "no CUDA device" : cudaGetErrorString(found));
  if (!all_usable) return std::nullopt;
  MPI_Comm node = MPI_COMM_NULL;
  check_mpi(MPI_Comm_split_type(MPI_COMM_WORLD, MPI_COMM_TYPE_SHARED, session.rank(), MPI_INFO_NULL,
                                &node),
            "MPI_Comm_split_type");
  int local_rank = 0;
  MPI_Comm_rank(node, &local_rank);
  MPI_Comm_free(&node);
  const int device = local_rank % count;
  check_cuda(cudaSetDevice(device), "cudaSetDevice");
  return device;
}

// The communicator of every rank of the job: rank 0's unique id, broadcast over MPI.
ncclComm_t init_comm(const MpiSession& session, Watchdog& watchdog, double timeout_s) {
  ncclUniqueId id;
  if (session.rank() == 0) check_nccl(ncclGetUniqueId(&id), "ncclGetUniqueId");
  check_mpi(MPI_Bcast(&id, sizeof id, MPI_BYTE, 0, MPI_COMM_WORLD), "MPI_Bcast");
  ncclComm_t comm = nullptr;
  watchdog.arm("ncclCommInitRank", timeout_s);
  check_nccl(ncclCommInitRank(&comm, session.size(), id, session.rank()), "ncclCommInitRank");
  watchdog.disarm();
  return comm;
}

// Polls the stream until it is idle; past `deadline` (MPI_Wtime) aborts the job with "timed
// out after TIMEOUT s in WHAT" and what `stuck` adds. A stuck driver call is the watchdog's.
void poll_stream(cudaStream_t stream, const MpiSession& session, double deadline, double timeout_s,
                 const std::string& what, const std::function<std::string()>& stuck = {}) {
  for (;;) {
    const cudaError_t state = cudaStreamQuery(stream);
    if (state == cudaSuccess) return;
    if (state != cudaErrorNotReady) check_cuda(state, "cudaStreamQuery");
    if (MPI_Wtime() > deadline)
      session.abort_job("timed out after " + std::to_string(static_cast<int>(timeout_s)) +
                            " s in " + what + (stuck ? stuck() : ""),
                        kTimedOut);
    sched_yield();
  }
}

/// A rank's buffers in device memory, mirroring the host RankBuffers (which fill and check).
class DeviceBuffers {
 public:
  DeviceBuffers(RankBuffers& host, std::int64_t staging_chunks) : host_(host) {
    for (BufferKind kind : {BufferKind::input, BufferKind::output, BufferKind::scratch})
      device_[index(kind)] = allocate(host.storage(kind).size());
    staging_ = allocate(static_cast<std::size_t>(staging_chunks) * host.layout().chunk_elems);
  }
  ~DeviceBuffers() {
    for (Element* pointer : device_) cudaFree(pointer);
    cudaFree(staging_);
  }
  DeviceBuffers(const DeviceBuffers&) = delete;
  DeviceBuffers& operator=(const DeviceBuffers&) = delete;

  Element* at(BufferKind kind, std::int64_t offset, std::int64_t count) const {
    const RankBuffers::Region where = host_.region(kind, offset, count);
    return device_[index(where.storage)] + where.offset;
  }
  Element* staging(std::int64_t offset_chunks) const {
    return staging_ + static_cast<std::size_t>(offset_chunks) * host_.layout().chunk_elems;
  }
  void upload() {
    for (BufferKind kind : {BufferKind::input, BufferKind::output, BufferKind::scratch})
      check_cuda(cudaMemcpy(device_[index(kind)], host_.storage(kind).data(),
                            host_.storage(kind).size_bytes(), cudaMemcpyHostToDevice),
                 "cudaMemcpy");
  }
  void download() {
    for (BufferKind kind : {BufferKind::input, BufferKind::output})
      check_cuda(cudaMemcpy(host_.storage(kind).data(), device_[index(kind)],
                            host_.storage(kind).size_bytes(), cudaMemcpyDeviceToHost),
                 "cudaMemcpy");
  }

 private:
  static std::size_t index(BufferKind kind) { return static_cast<std::size_t>(kind); }
  static Element* allocate(std::size_t elements) {
    Element* pointer = nullptr;
    if (elements > 0) check_cuda(cudaMalloc(&pointer, elements * sizeof(Element)), "cudaMalloc");
    return pointer;
  }
  RankBuffers& host_;
  std::array<Element*, 3> device_{};
  Element* staging_ = nullptr;
};

class NcclJob {
 public:
  NcclJob(const schedule::Schedule& schedule, const RunOptions& options)
      : schedule_(schedule),
        options_(options),
        flat_(schedule),
        plan_(flat_),
        watchdog_(session_) {}

  ~NcclJob() {
    if (stream_) cudaStreamDestroy(stream_);
    if (comm_) ncclCommDestroy(comm_);
  }

  int run(const Reporter& reporter) {
    try {
      const std::optional<int> device = find_device(session_);
      if (!device) return kNoDevice;
      device_ = *device;
      return measure_all(reporter);
    } catch (const std::exception& e) {
      session_.abort_job(e.what(), 1);
    }
  }

 private:
  int measure_all(const Reporter& reporter) {
    if (session_.size() != schedule_.ranks)
      session_.abort_job("the schedule has " + std::to_string(schedule_.ranks) +
                             " ranks but the job has " + std::to_string(session_.size()),
                         2);
    comm_ = init_comm(session_, watchdog_, options_.timeout_s);
    check_cuda(cudaStreamCreateWithFlags(&stream_, cudaStreamNonBlocking), "cudaStreamCreate");
    levels_ = plan_.rank_levels(session_.rank());

    JobInfo job = detail::describe_job(session_, "nccl");
    job.library = nccl_version_text() + ", bootstrap " + job.library;
    cudaDeviceProp properties{};
    check_cuda(cudaGetDeviceProperties(&properties, device_), "cudaGetDeviceProperties");
    job.devices =
        std::string(properties.name) + " (rank 0: device " + std::to_string(device_) + ")";
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
    RankBuffers host(BufferLayout::of(schedule_, session_.rank(), size_bytes));
    current_chunk_elems_ = host.layout().chunk_elems;
    DeviceBuffers device(host, plan_.staging_chunks(session_.rank()));
    host.fill();
    device.upload();
    std::vector<cudaEvent_t> level_done(levels_.size());
    for (cudaEvent_t& event : level_done)
      check_cuda(cudaEventCreateWithFlags(&event, cudaEventDisableTiming), "cudaEventCreate");
    issue(device, level_done);
    wait("the checked execution at " + size_text, &level_done);
    for (cudaEvent_t event : level_done) cudaEventDestroy(event);
    device.download();
    const std::uint64_t wrong = sum_over_ranks(host.count_wrong(), size_text);
    double time_us = 0;
    if (wrong == 0) time_us = timed(size_text, [&] { issue(device, {}); });
    result.schedule = make_measurement(schedule_.name, schedule_.collective, schedule_.ranks,
                                       size_bytes, time_us, wrong);
    if (options_.native) result.native = measure_native(size_bytes, host.layout());
    return result;
  }

  // One execution of the plan on the stream: per level, local work, then the group.
  void issue(const DeviceBuffers& device, const std::vector<cudaEvent_t>& level_done) {
    for (std::size_t l = 0; l < levels_.size(); ++l) {
      const PlanLevel& level = levels_[l];
      for (StepId id : level.local) run_local(device, id);
      if (!level.sends.empty() || !level.recvs.empty()) {
        check_nccl(ncclGroupStart(), "ncclGroupStart");
        for (StepId id : level.recvs) {
          const schedule::Step& step = flat_.step(id);
          Element* into = device.staging(plan_.staging_offset(id));
          check_nccl(ncclRecv(into, elements(step), ncclUint32, peer_of(id, false), comm_, stream_),
                     "ncclRecv");
        }
        for (StepId id : level.sends) {
          const schedule::Step& step = flat_.step(id);
          const Element* from = step.kind == StepKind::send
                                    ? device.at(step.src_buf, step.src_off, step.count)
                                : step.kind == StepKind::recv_reduce_send
                                    ? device.staging(plan_.staging_offset(id))
                                    : device.at(step.dst_buf, step.dst_off, step.count);
          check_nccl(ncclSend(from, elements(step), ncclUint32, peer_of(id, true), comm_, stream_),
                     "ncclSend");
        }
        check_nccl(ncclGroupEnd(), "ncclGroupEnd");
      }
      if (!level_done.empty())
        check_cuda(cudaEventRecord(level_done[l], stream_), "cudaEventRecord");
    }
  }

  void run_local(const DeviceBuffers& device, StepId id) {
    const schedule::Step& step = flat_.step(id);
    if (step.kind == StepKind::nop) return;
    const std::size_t n = elements(step);
    if (schedule::step_receives(step.kind)) {
      Element* staged = device.staging(plan_.staging_offset(id));
      if (step.kind == StepKind::recv || step.kind == StepKind::recv_copy_send) {
        copy(device.at(step.dst_buf, step.dst_off, step.count), staged, n);
        return;
      }
      const Element* src = device.at(step.src_buf, step.src_off, step.count);
      Element* into = step.kind == StepKind::recv_reduce_send
                          ? staged
                          : device.at(step.dst_buf, step.dst_off, step.count);
      check_cuda(detail::launch_add(into, src, staged, n, stream_), "add kernel");
      return;
    }
    const Element* src = device.at(step.src_buf, step.src_off, step.count);
    Element* dst = device.at(step.dst_buf, step.dst_off, step.count);
    if (step.kind == StepKind::copy)
      copy(dst, src, n);
    else
      check_cuda(detail::launch_add(dst, dst, src, n, stream_), "add kernel");
  }

  void copy(Element* dst, const Element* src, std::size_t n) {
    check_cuda(cudaMemcpyAsync(dst, src, n * sizeof(Element), cudaMemcpyDeviceToDevice, stream_),
               "cudaMemcpyAsync");
  }

  std::size_t elements(const schedule::Step& step) const {
    return static_cast<std::size_t>(step.count) * current_chunk_elems_;
  }

  std::int32_t peer_of(StepId id, bool sending) const {
    const schedule::ThreadBlock& tb = schedule_.programs[static_cast<std::size_t>(session_.rank())]
                                          .tbs[static_cast<std::size_t>(flat_.block_of(id).index)];
    return sending ? tb.send_peer : tb.recv_peer;
  }

  Measurement measure_native(std::uint64_t size_bytes, BufferLayout layout) {
    const std::string name = nccl_native_name(schedule_.collective);
    const std::string size_text = support::format_size(size_bytes);
    layout.inplace = false;
    const bool gather = layout.collective == support::Collective::all_gather;
    const bool scatter = layout.collective == support::Collective::reduce_scatter;
    layout.input_chunks = gather ? layout.own_chunks : layout.chunks;
    layout.output_chunks = scatter ? layout.own_chunks : layout.chunks;
    layout.scratch_chunks = 0;
    RankBuffers host(layout);
    DeviceBuffers device(host, 0);
    const std::size_t own = static_cast<std::size_t>(layout.own_chunks) * layout.chunk_elems;
    const std::size_t all = static_cast<std::size_t>(layout.chunks) * layout.chunk_elems;
    const Element* in = device.at(BufferKind::input, 0, layout.input_chunks);
    Element* out = device.at(BufferKind::output, 0, layout.output_chunks);
    auto call = [&] {
      if (gather)
        check_nccl(ncclAllGather(in, out, own, ncclUint32, comm_, stream_), "ncclAllGather");
      else if (scatter)
        check_nccl(ncclReduceScatter(in, out, own, ncclUint32, ncclSum, comm_, stream_),
                   "ncclReduceScatter");
      else
        check_nccl(ncclAllReduce(in, out, all, ncclUint32, ncclSum, comm_, stream_),
                   "ncclAllReduce");
    };
    host.fill();
    device.upload();
    call();
    wait(name + " at " + size_text, nullptr);
    device.download();
    const std::uint64_t wrong = sum_over_ranks(host.count_wrong(), size_text);
    const double time_us = wrong == 0 ? timed(size_text, call) : 0;
    return make_measurement(name, schedule_.collective, schedule_.ranks, size_bytes, time_us,
                            wrong);
  }

  template <typename Issue>
  double timed(const std::string& size_text, Issue&& issue_once) {
    for (int i = 0; i < options_.warmup_iters; ++i) issue_once();
    wait("the warm-up at " + size_text, nullptr);
    barrier("the barrier before the timed iterations at " + size_text);
    cudaEvent_t start = nullptr, stop = nullptr;
    check_cuda(cudaEventCreate(&start), "cudaEventCreate");
    check_cuda(cudaEventCreate(&stop), "cudaEventCreate");
    check_cuda(cudaEventRecord(start, stream_), "cudaEventRecord");
    for (int i = 0; i < options_.iters; ++i) issue_once();
    check_cuda(cudaEventRecord(stop, stream_), "cudaEventRecord");
    wait("the timed iterations at " + size_text, nullptr);
    float elapsed_ms = 0;
    check_cuda(cudaEventElapsedTime(&elapsed_ms, start, stop), "cudaEventElapsedTime");
    cudaEventDestroy(start);
    cudaEventDestroy(stop);
    double mine_us = elapsed_ms * 1e3 / std::max(options_.iters, 1), slowest_us = 0;
    check_mpi(MPI_Allreduce(&mine_us, &slowest_us, 1, MPI_DOUBLE, MPI_MAX, MPI_COMM_WORLD),
              "MPI_Allreduce");
    return slowest_us;
  }

  // Polls the stream against the deadline (the watchdog, 5 s later, is for a stuck driver
  // call); on a timeout names the first unfinished level's transfers of this rank.
  void wait(const std::string& what, const std::vector<cudaEvent_t>* level_done) {
    watchdog_.arm(what, options_.timeout_s + 5);
    poll_stream(stream_, session_, MPI_Wtime() + options_.timeout_s, options_.timeout_s, what,
                [&] { return stuck_level(level_done); });
    watchdog_.disarm();
  }

  std::string stuck_level(const std::vector<cudaEvent_t>* level_done) const {
    if (level_done == nullptr) return "";
    for (std::size_t l = 0; l < level_done->size(); ++l) {
      if (cudaEventQuery((*level_done)[l]) == cudaSuccess) continue;
      std::string text = ":\nlevel " + std::to_string(l) + " of " + std::to_string(levels_.size()) +
                         " has not finished:";
      std::size_t shown = 0;
      for (StepId id : levels_[l].recvs) {
        if (shown++ == 4) break;
        text += "\ntb " + std::to_string(flat_.block_of(id).index) + " step " +
                std::to_string(flat_.index_in_block(id)) + " (" +
                std::string(schedule::to_string(flat_.step(id).kind)) +
                ") waits for a message from rank " + std::to_string(peer_of(id, false));
      }
      return text;
    }
    return "";
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

  const schedule::Schedule& schedule_;
  const RunOptions& options_;
  MpiSession session_;
  schedule::FlatSchedule flat_;
  LevelPlan plan_;
  Watchdog watchdog_;
  std::vector<PlanLevel> levels_;
  int device_ = 0;
  ncclComm_t comm_ = nullptr;
  cudaStream_t stream_ = nullptr;
  std::size_t current_chunk_elems_ = 0;
};

// The ping-pong calibration on this rank's GPU: its communicator, stream, buffer and events,
// released before MPI is finalised.
class NcclCalibration {
 public:
  NcclCalibration(const MpiSession& session, Watchdog& watchdog, const CalibrationOptions& options)
      : session_(session), watchdog_(watchdog), options_(options) {}
  ~NcclCalibration() {
    if (start_) cudaEventDestroy(start_);
    if (stop_) cudaEventDestroy(stop_);
    cudaFree(buffer_);
    if (stream_) cudaStreamDestroy(stream_);
    if (comm_) ncclCommDestroy(comm_);
  }
  NcclCalibration(const NcclCalibration&) = delete;
  NcclCalibration& operator=(const NcclCalibration&) = delete;

  std::vector<PairSample> run() {
    comm_ = init_comm(session_, watchdog_, options_.timeout_s);
    check_cuda(cudaStreamCreateWithFlags(&stream_, cudaStreamNonBlocking), "cudaStreamCreate");
    std::size_t largest = 1;
    for (std::uint64_t bytes : options_.sizes) largest = std::max<std::size_t>(largest, bytes);
    check_cuda(cudaMalloc(&buffer_, largest), "cudaMalloc");
    check_cuda(cudaMemset(buffer_, 1, largest), "cudaMemset");
    check_cuda(cudaEventCreate(&start_), "cudaEventCreate");
    check_cuda(cudaEventCreate(&stop_), "cudaEventCreate");
    // The grace lets this rank's own timeout, which names the phase, fire before the watchdog.
    return detail::measure_pairs(
        session_, watchdog_, options_, 5,
        [this](int peer, bool measuring, std::uint64_t bytes, const std::string& what) {
          return ping_pong(peer, measuring, bytes, what);
        });
  }

 private:
  // Warm-up, then the timed round trips between CUDA events on the measuring rank; one
  // deadline for both, as the MPI version's timeout covers its whole ping-pong.
  double ping_pong(int peer, bool measuring, std::uint64_t bytes, const std::string& what) {
    const std::string at = what + " at " + support::format_size(bytes);
    const double deadline = MPI_Wtime() + options_.timeout_s;
    for (int i = 0; i < options_.warmup_iters; ++i) round_trip(peer, measuring, bytes);
    poll_stream(stream_, session_, deadline, options_.timeout_s, "the warm-up of " + at);
    if (measuring) check_cuda(cudaEventRecord(start_, stream_), "cudaEventRecord");
    for (int i = 0; i < options_.iters; ++i) round_trip(peer, measuring, bytes);
    if (measuring) check_cuda(cudaEventRecord(stop_, stream_), "cudaEventRecord");
    poll_stream(stream_, session_, deadline, options_.timeout_s, at);
    if (!measuring) return 0;
    float elapsed_ms = 0;
    check_cuda(cudaEventElapsedTime(&elapsed_ms, start_, stop_), "cudaEventElapsedTime");
    return elapsed_ms * 1e3 / (2.0 * std::max(options_.iters, 1));
  }

  // The measuring rank sends first; each transfer is its own group call on the stream.
  void round_trip(int peer, bool measuring, std::size_t bytes) {
    if (measuring) {
      send(peer, bytes);
      receive(peer, bytes);
    } else {
      receive(peer, bytes);
      send(peer, bytes);
    }
  }
  void send(int peer, std::size_t bytes) {
    check_nccl(ncclGroupStart(), "ncclGroupStart");
    check_nccl(ncclSend(buffer_, bytes, ncclInt8, peer, comm_, stream_), "ncclSend");
    check_nccl(ncclGroupEnd(), "ncclGroupEnd");
  }
  void receive(int peer, std::size_t bytes) {
    check_nccl(ncclGroupStart(), "ncclGroupStart");
    check_nccl(ncclRecv(buffer_, bytes, ncclInt8, peer, comm_, stream_), "ncclRecv");
    check_nccl(ncclGroupEnd(), "ncclGroupEnd");
  }

  const MpiSession& session_;
  Watchdog& watchdog_;
  const CalibrationOptions& options_;
  ncclComm_t comm_ = nullptr;
  cudaStream_t stream_ = nullptr;
  void* buffer_ = nullptr;
  cudaEvent_t start_ = nullptr, stop_ = nullptr;
};

}  // namespace

bool nccl_backend_built() {
  return true;
}

int run_nccl_job(const schedule::Schedule& schedule, const RunOptions& options,
                 const Reporter& reporter) {
  NcclJob job(schedule, options);
  return job.run(reporter);
}

std::vector<PairSample> run_nccl_calibration(const CalibrationOptions& options) {
  bool no_device = false;
  std::vector<PairSample> samples;
  {
    MpiSession session;
    Watchdog watchdog(session);
    try {
      if (find_device(session)) {
        NcclCalibration calibration(session, watchdog, options);
        samples = calibration.run();
      } else {
        no_device = true;
      }
    } catch (const std::exception& e) {
      session.abort_job(e.what(), 1);
    }
  }
  // Thrown once MPI is finalised, so that the caller can end the rank with kNoDevice.
  if (no_device) throw NoDeviceError("no GPU for the NCCL backend");
  return samples;
}

}  // namespace optiflow::hw_runner
