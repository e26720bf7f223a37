// What both backends need from MPI (the NCCL backend uses it to bootstrap): the session, typed
// errors, a watchdog that ends a rank stuck in a blocking call, and the job's description.
// Internal to hw_runner.
#pragma once

#include <mpi.h>

#include <chrono>
#include <condition_variable>
#include <mutex>
#include <stdexcept>
#include <string>
#include <thread>
#include <vector>

#include "call_error.hpp"
#include "optiflow/hw_runner/measure.hpp"

namespace optiflow::hw_runner::detail {

/// A failed MPI call (code: the MPI error code; message: MPI_Error_string's text).
class MpiError : public CallError {
 public:
  MpiError(const std::string& call, int code);
};

inline void check_mpi(int code, const char* call) {
  if (code != MPI_SUCCESS) throw MpiError(call, code);
}

/// MPI_Init ... MPI_Finalize; errors on MPI_COMM_WORLD are returned (and thrown), not fatal.
class MpiSession {
 public:
  MpiSession();
  ~MpiSession();
  MpiSession(const MpiSession&) = delete;
  MpiSession& operator=(const MpiSession&) = delete;
  int rank() const { return rank_; }
  int size() const { return size_; }
  const std::string& host() const { return host_; }
  /// Prints "optiflow run: rank R (host H): MESSAGE" on stderr and aborts the whole job.
  [[noreturn]] void abort_job(const std::string& message, int code) const;

 private:
  int rank_ = 0, size_ = 1;
  std::string host_;
};

/// Ends this process (and so, through mpirun, the job) when a phase outlasts its deadline:
/// the last resort for a rank blocked inside an MPI or NCCL call that never returns.
class Watchdog {
 public:
  explicit Watchdog(const MpiSession& session);
  ~Watchdog();
  void arm(const std::string& what, double seconds);
  void disarm();

 private:
  void watch();
  const MpiSession& session_;
  std::mutex mutex_;
  std::condition_variable changed_;
  std::string what_;
  double seconds_ = 0;
  std::chrono::steady_clock::time_point deadline_{};
  bool armed_ = false, stop_ = false;
  std::thread thread_;
};

/// "timed out after SECONDS s in WHAT": the one form of every timeout message of the runner.
std::string timeout_message(double seconds, const std::string& what);

/// This rank's place among the ranks of its node (MPI_COMM_TYPE_SHARED); collective.
struct NodePlace {
  int rank = 0;   ///< its rank on the node
  int ranks = 1;  ///< the node's ranks
};
NodePlace node_place(const MpiSession& session);

/// Each rank's host, gathered on every rank (collective).
std::vector<std::string> gather_hosts(const MpiSession& session);

/// Hosts per rank and the MPI library's version line, gathered on every rank.
JobInfo describe_job(const MpiSession& session, const std::string& backend);

/// Size of one element in the MPI collectives (uint32).
inline MPI_Datatype element_type() {
  return MPI_UINT32_T;
}

}  // namespace optiflow::hw_runner::detail
