// The NCCL backend (built only where CUDA and NCCL are found): MPI starts the ranks and
// carries NCCL's unique id; each rank drives one GPU through the schedule's level plan.
#include "optiflow/hw_runner/nccl_backend.hpp"

#include <array>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "job_driver.hpp"
#include "nccl_kernels.hpp"
#include "nccl_support.hpp"
#include "optiflow/hw_runner/buffers.hpp"
#include "optiflow/hw_runner/level_plan.hpp"
#include "optiflow/support/units.hpp"

namespace optiflow::hw_runner {
namespace {

using detail::check_cuda;
using detail::check_nccl;
using detail::MpiSession;
using detail::Watchdog;
using schedule::BufferKind;
using schedule::StepId;
using schedule::StepKind;

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

// The backend: executions issued on the rank's stream, waited for by polling it, timed with
// CUDA events.
class NcclBackend final : public detail::Backend {
 public:
  NcclBackend(const MpiSession& session, Watchdog& watchdog, const schedule::Schedule& schedule,
              const RunOptions& options)
      : session_(session),
        watchdog_(watchdog),
        schedule_(schedule),
        options_(options),
        flat_(schedule),
        plan_(flat_) {}
  ~NcclBackend() override {
    if (clock_start_) cudaEventDestroy(clock_start_);
    if (clock_stop_) cudaEventDestroy(clock_stop_);
    if (stream_) cudaStreamDestroy(stream_);
    if (comm_) ncclCommDestroy(comm_);
  }
  NcclBackend(const NcclBackend&) = delete;
  NcclBackend& operator=(const NcclBackend&) = delete;

  /// This rank's GPU (find_device), before start().
  void use_device(int device) { device_ = device; }

  JobInfo start() override {
    comm_ = detail::init_comm(session_, watchdog_, options_.timeout_s, device_);
    check_cuda(cudaStreamCreateWithFlags(&stream_, cudaStreamNonBlocking), "cudaStreamCreate");
    levels_ = plan_.rank_levels(session_.rank());
    check_cuda(cudaEventCreate(&clock_start_), "cudaEventCreate");
    check_cuda(cudaEventCreate(&clock_stop_), "cudaEventCreate");

    JobInfo job = detail::describe_job(session_, "nccl");
    job.library = detail::nccl_version_text() + ", bootstrap " + job.library;
    cudaDeviceProp properties{};
    check_cuda(cudaGetDeviceProperties(&properties, device_), "cudaGetDeviceProperties");
    job.devices =
        std::string(properties.name) + " (rank 0: device " + std::to_string(device_) + ")";
    return job;
  }
  std::string native_name() const override { return nccl_native_name(schedule_.collective); }
  std::unique_ptr<detail::Execution> schedule(RankBuffers& buffers) override {
    return std::make_unique<ScheduleExecution>(*this, buffers);
  }
  std::unique_ptr<detail::Execution> native(RankBuffers& buffers) override {
    return std::make_unique<NativeExecution>(*this, buffers);
  }
  void wait(const std::string& what) override { wait_stream(what, nullptr); }
  void start_clock() override {
    check_cuda(cudaEventRecord(clock_start_, stream_), "cudaEventRecord");
  }
  void stop_clock() override {
    check_cuda(cudaEventRecord(clock_stop_, stream_), "cudaEventRecord");
  }
  double elapsed_us() override {
    float elapsed_ms = 0;
    check_cuda(cudaEventElapsedTime(&elapsed_ms, clock_start_, clock_stop_),
               "cudaEventElapsedTime");
    return support::us_of_ms(elapsed_ms);
  }

 private:
  // The schedule's level plan on the device copy of the host buffers.
  class ScheduleExecution final : public detail::Execution {
   public:
    ScheduleExecution(NcclBackend& backend, RankBuffers& host)
        : backend_(backend),
          chunk_elems_(host.layout().chunk_elems),
          device_(host, backend.plan_.staging_chunks(backend.session_.rank())) {
      device_.upload();
    }

    // Each level records an event, so that a timeout can name the first unfinished level.
    void run_checked(const std::string& what) override {
      std::vector<cudaEvent_t> level_done(backend_.levels_.size());
      for (cudaEvent_t& event : level_done)
        check_cuda(cudaEventCreateWithFlags(&event, cudaEventDisableTiming), "cudaEventCreate");
      issue_levels(device_, level_done);
      backend_.wait_stream(what, &level_done);
      for (cudaEvent_t event : level_done) cudaEventDestroy(event);
      device_.download();
    }
    void issue(const std::string&) override { issue_levels(device_, {}); }

   private:
    // One execution of the plan on the stream: per level, local work, then the group.
    void issue_levels(const DeviceBuffers& device, const std::vector<cudaEvent_t>& level_done) {
      for (std::size_t l = 0; l < backend_.levels_.size(); ++l) {
        const PlanLevel& level = backend_.levels_[l];
        for (StepId id : level.local) run_local(device, id);
        if (!level.sends.empty() || !level.recvs.empty()) {
          check_nccl(ncclGroupStart(), "ncclGroupStart");
          for (StepId id : level.recvs) {
            const schedule::Step& step = backend_.flat_.step(id);
            Element* into = device.staging(backend_.plan_.staging_offset(id));
            check_nccl(ncclRecv(into, elements(step), ncclUint32, backend_.peer_of(id, false),
                                backend_.comm_, backend_.stream_),
                       "ncclRecv");
          }
          for (StepId id : level.sends) {
            const schedule::Step& step = backend_.flat_.step(id);
            const Element* from = step.kind == StepKind::send
                                      ? device.at(step.src_buf, step.src_off, step.count)
                                  : step.kind == StepKind::recv_reduce_send
                                      ? device.staging(backend_.plan_.staging_offset(id))
                                      : device.at(step.dst_buf, step.dst_off, step.count);
            check_nccl(ncclSend(from, elements(step), ncclUint32, backend_.peer_of(id, true),
                                backend_.comm_, backend_.stream_),
                       "ncclSend");
          }
          check_nccl(ncclGroupEnd(), "ncclGroupEnd");
        }
        if (!level_done.empty())
          check_cuda(cudaEventRecord(level_done[l], backend_.stream_), "cudaEventRecord");
      }
    }

    void run_local(const DeviceBuffers& device, StepId id) {
      const schedule::Step& step = backend_.flat_.step(id);
      if (step.kind == StepKind::nop) return;
      const std::size_t n = elements(step);
      if (schedule::step_receives(step.kind)) {
        Element* staged = device.staging(backend_.plan_.staging_offset(id));
        if (step.kind == StepKind::recv || step.kind == StepKind::recv_copy_send) {
          copy(device.at(step.dst_buf, step.dst_off, step.count), staged, n);
          return;
        }
        const Element* src = device.at(step.src_buf, step.src_off, step.count);
        Element* into = step.kind == StepKind::recv_reduce_send
                            ? staged
                            : device.at(step.dst_buf, step.dst_off, step.count);
        check_cuda(detail::launch_add(into, src, staged, n, backend_.stream_), "add kernel");
        return;
      }
      const Element* src = device.at(step.src_buf, step.src_off, step.count);
      Element* dst = device.at(step.dst_buf, step.dst_off, step.count);
      if (step.kind == StepKind::copy)
        copy(dst, src, n);
      else
        check_cuda(detail::launch_add(dst, dst, src, n, backend_.stream_), "add kernel");
    }

    void copy(Element* dst, const Element* src, std::size_t n) {
      check_cuda(cudaMemcpyAsync(dst, src, n * sizeof(Element), cudaMemcpyDeviceToDevice,
                                 backend_.stream_),
                 "cudaMemcpyAsync");
    }

    std::size_t elements(const schedule::Step& step) const {
      return static_cast<std::size_t>(step.count) * chunk_elems_;
    }

    NcclBackend& backend_;
    std::size_t chunk_elems_;
    DeviceBuffers device_;
  };

  // The native collective, out of place, on a device copy of the host buffers.
  class NativeExecution final : public detail::Execution {
   public:
    NativeExecution(NcclBackend& backend, RankBuffers& host)
        : backend_(backend),
          layout_(host.layout()),
          device_(host, 0),
          own_(static_cast<std::size_t>(layout_.own_chunks) * layout_.chunk_elems),
          all_(static_cast<std::size_t>(layout_.chunks) * layout_.chunk_elems),
          in_(device_.at(BufferKind::input, 0, layout_.input_chunks)),
          out_(device_.at(BufferKind::output, 0, layout_.output_chunks)) {
      device_.upload();
    }

    void run_checked(const std::string& what) override {
      issue(what);
      backend_.wait_stream(what, nullptr);
      device_.download();
    }
    void issue(const std::string&) override {
      ncclComm_t comm = backend_.comm_;
      cudaStream_t stream = backend_.stream_;
      if (layout_.collective == support::Collective::all_gather)
        check_nccl(ncclAllGather(in_, out_, own_, ncclUint32, comm, stream), "ncclAllGather");
      else if (layout_.collective == support::Collective::reduce_scatter)
        check_nccl(ncclReduceScatter(in_, out_, own_, ncclUint32, ncclSum, comm, stream),
                   "ncclReduceScatter");
      else
        check_nccl(ncclAllReduce(in_, out_, all_, ncclUint32, ncclSum, comm, stream),
                   "ncclAllReduce");
    }

   private:
    NcclBackend& backend_;
    BufferLayout layout_;
    DeviceBuffers device_;
    std::size_t own_, all_;  ///< elements of this rank's part and of the whole
    const Element* in_;
    Element* out_;
  };

  std::int32_t peer_of(StepId id, bool sending) const {
    const schedule::ThreadBlock& tb = schedule_.programs[static_cast<std::size_t>(session_.rank())]
                                          .tbs[static_cast<std::size_t>(flat_.block_of(id).index)];
    return sending ? tb.send_peer : tb.recv_peer;
  }

  // Polls the stream against the deadline (the watchdog, 5 s later, is for a stuck driver
  // call); on a timeout names the first unfinished level's transfers of this rank.
  void wait_stream(const std::string& what, const std::vector<cudaEvent_t>* level_done) {
    watchdog_.arm(what, options_.timeout_s + 5);
    detail::poll_stream(stream_, session_, MPI_Wtime() + options_.timeout_s, options_.timeout_s,
                        what, [&] { return stuck_level(level_done); });
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

  const MpiSession& session_;
  Watchdog& watchdog_;
  const schedule::Schedule& schedule_;
  const RunOptions& options_;
  schedule::FlatSchedule flat_;
  LevelPlan plan_;
  std::vector<PlanLevel> levels_;
  int device_ = 0;
  ncclComm_t comm_ = nullptr;
  cudaStream_t stream_ = nullptr;
  cudaEvent_t clock_start_ = nullptr, clock_stop_ = nullptr;
};

}  // namespace

bool nccl_backend_built() {
  return true;
}

int run_nccl_job(const schedule::Schedule& schedule, const RunOptions& options,
                 const Reporter& reporter) {
  MpiSession session;
  Watchdog watchdog(session);
  NcclBackend backend(session, watchdog, schedule, options);
  try {
    const std::optional<int> device = detail::find_device(session);
    if (!device) return kNoDevice;
    backend.use_device(*device);
    return detail::run_job(session, watchdog, schedule, options, backend, reporter);
  } catch (const std::exception& e) {
    session.abort_job(e.what(), 1);
  }
}

}  // namespace optiflow::hw_runner
