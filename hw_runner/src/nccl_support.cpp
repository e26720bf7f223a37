// The NCCL backend's device, communicator and stream helpers (nccl_support.hpp).
#include "nccl_support.hpp"

#include <sched.h>

#include <cstdio>
#include <map>
#include <utility>
#include <vector>

#include "optiflow/hw_runner/measure.hpp"

namespace optiflow::hw_runner::detail {
namespace {

// "ranks 0 and 1 share device 0 of host vm" for each GPU that several ranks were given; empty
// when every rank has its own. Collective: every rank calls it.
std::string shared_devices(const MpiSession& session, int device) {
  const std::vector<std::string> hosts = gather_hosts(session);
  std::vector<int> devices(static_cast<std::size_t>(session.size()));
  check_mpi(MPI_Allgather(&device, 1, MPI_INT, devices.data(), 1, MPI_INT, MPI_COMM_WORLD),
            "MPI_Allgather");
  std::map<std::pair<std::string, int>, std::vector<int>> ranks_on;
  for (std::size_t r = 0; r < devices.size(); ++r)
    ranks_on[{hosts[r], devices[r]}].push_back(static_cast<int>(r));
  std::string text;
  for (const auto& [where, ranks] : ranks_on) {
    if (ranks.size() < 2) continue;
    std::string names;
    for (std::size_t i = 0; i < ranks.size(); ++i)
      names += (i == 0 ? "" : i + 1 == ranks.size() ? " and " : ", ") + std::to_string(ranks[i]);
    text += (text.empty() ? "ranks " : ", ranks ") + names + " share device " +
            std::to_string(where.second) + " of host " + where.first;
  }
  return text;
}

}  // namespace

std::string nccl_version_text() {
  int version = 0;
  ncclGetVersion(&version);
  int runtime = 0;
  cudaRuntimeGetVersion(&runtime);
  return "NCCL " + std::to_string(version / 10000) + "." + std::to_string(version / 100 % 100) +
         "." + std::to_string(version % 100) + ", CUDA runtime " + std::to_string(runtime / 1000) +
         "." + std::to_string(runtime / 10 % 100);
}

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
  const int device = node_place(session).rank % count;
  check_cuda(cudaSetDevice(device), "cudaSetDevice");
  return device;
}

ncclComm_t init_comm(const MpiSession& session, Watchdog& watchdog, double timeout_s, int device) {
  const std::string shared = shared_devices(session, device);
  ncclUniqueId id;
  if (session.rank() == 0) check_nccl(ncclGetUniqueId(&id), "ncclGetUniqueId");
  check_mpi(MPI_Bcast(&id, sizeof id, MPI_BYTE, 0, MPI_COMM_WORLD), "MPI_Bcast");
  ncclComm_t comm = nullptr;
  watchdog.arm("ncclCommInitRank", timeout_s);
  const ncclResult_t created = ncclCommInitRank(&comm, session.size(), id, session.rank());
  if (created != ncclSuccess && !shared.empty())
    throw NcclError("ncclCommInitRank", static_cast<int>(created), ncclGetErrorString(created),
                    "NCCL needs one GPU per rank, but " + shared);
  check_nccl(created, "ncclCommInitRank");
  watchdog.disarm();
  return comm;
}

void poll_stream(cudaStream_t stream, const MpiSession& session, double deadline, double timeout_s,
                 const std::string& what, const std::function<std::string()>& stuck) {
  for (;;) {
    const cudaError_t state = cudaStreamQuery(stream);
    if (state == cudaSuccess) return;
    if (state != cudaErrorNotReady) check_cuda(state, "cudaStreamQuery");
    if (MPI_Wtime() > deadline)
      session.abort_job(timeout_message(timeout_s, what) + (stuck ? stuck() : ""), kTimedOut);
    sched_yield();
  }
}

}  // namespace optiflow::hw_runner::detail
