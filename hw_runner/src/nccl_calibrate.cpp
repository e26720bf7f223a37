// The NCCL form of the ping-pong calibration (run_nccl_calibration of nccl_backend.hpp): the
// pair loop of calibration_pairs.hpp, each ping-pong as ncclSend/ncclRecv timed with CUDA events.
#include <algorithm>
#include <optional>
#include <string>
#include <vector>

#include "calibration_pairs.hpp"
#include "nccl_support.hpp"
#include "optiflow/hw_runner/nccl_backend.hpp"
#include "optiflow/support/sizes.hpp"
#include "optiflow/support/units.hpp"

namespace optiflow::hw_runner {
namespace {

using detail::check_cuda;
using detail::check_nccl;
using detail::MpiSession;
using detail::poll_stream;
using detail::Watchdog;

// The ping-pong calibration on this rank's GPU: its communicator, stream, buffer and events,
// released before MPI is finalised.
class NcclCalibration {
 public:
  NcclCalibration(const MpiSession& session, Watchdog& watchdog, const CalibrationOptions& options,
                  int device)
      : session_(session), watchdog_(watchdog), options_(options), device_(device) {}
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
    comm_ = detail::init_comm(session_, watchdog_, options_.timeout_s, device_);
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
    return support::us_of_ms(elapsed_ms) / (2.0 * std::max(options_.iters, 1));
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
  int device_;
  ncclComm_t comm_ = nullptr;
  cudaStream_t stream_ = nullptr;
  void* buffer_ = nullptr;
  cudaEvent_t start_ = nullptr, stop_ = nullptr;
};

}  // namespace

std::vector<PairSample> run_nccl_calibration(const CalibrationOptions& options) {
  bool no_device = false;
  std::vector<PairSample> samples;
  {
    MpiSession session;
    Watchdog watchdog(session);
    try {
      if (const std::optional<int> device = detail::find_device(session)) {
        NcclCalibration calibration(session, watchdog, options, *device);
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
