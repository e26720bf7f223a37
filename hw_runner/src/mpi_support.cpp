// The MPI session, typed MPI errors, the watchdog and the job's description that both backends
// use (mpi_support.hpp).
#include "mpi_support.hpp"

#include <cstdio>
#include <cstdlib>

namespace optiflow::hw_runner::detail {
namespace {

std::string error_string(int code) {
  char text[MPI_MAX_ERROR_STRING];
  int length = 0;
  if (MPI_Error_string(code, text, &length) != MPI_SUCCESS) return "unknown MPI error";
  return std::string(text, static_cast<std::size_t>(length));
}

}  // namespace

MpiError::MpiError(const std::string& call, int code)
    : CallError("MPI", call, code, error_string(code)) {}

MpiSession::MpiSession() {
  int provided = 0;
  check_mpi(MPI_Init_thread(nullptr, nullptr, MPI_THREAD_FUNNELED, &provided), "MPI_Init_thread");
  check_mpi(MPI_Comm_set_errhandler(MPI_COMM_WORLD, MPI_ERRORS_RETURN), "MPI_Comm_set_errhandler");
  check_mpi(MPI_Comm_rank(MPI_COMM_WORLD, &rank_), "MPI_Comm_rank");
  check_mpi(MPI_Comm_size(MPI_COMM_WORLD, &size_), "MPI_Comm_size");
  char name[MPI_MAX_PROCESSOR_NAME];
  int length = 0;
  check_mpi(MPI_Get_processor_name(name, &length), "MPI_Get_processor_name");
  host_.assign(name, static_cast<std::size_t>(length));
}

MpiSession::~MpiSession() {
  MPI_Finalize();
}

void MpiSession::abort_job(const std::string& message, int code) const {
  std::fprintf(stderr, "optiflow run: rank %d (host %s): %s\n", rank_, host_.c_str(),
               message.c_str());
  std::fflush(stderr);
  MPI_Abort(MPI_COMM_WORLD, code);
  std::_Exit(code);  // MPI_Abort does not return; this is for a library that does
}

Watchdog::Watchdog(const MpiSession& session) : session_(session), thread_([this] { watch(); }) {}

Watchdog::~Watchdog() {
  {
    std::lock_guard lock(mutex_);
    stop_ = true;
  }
  changed_.notify_all();
  thread_.join();
}

void Watchdog::arm(const std::string& what, double seconds) {
  {
    std::lock_guard lock(mutex_);
    what_ = what;
    seconds_ = seconds;
    deadline_ = std::chrono::steady_clock::now() +
                std::chrono::duration_cast<std::chrono::steady_clock::duration>(
                    std::chrono::duration<double>(seconds));
    armed_ = true;
  }
  changed_.notify_all();
}

void Watchdog::disarm() {
  std::lock_guard lock(mutex_);
  armed_ = false;
}

void Watchdog::watch() {
  std::unique_lock lock(mutex_);
  while (!stop_) {
    if (!armed_) {
      changed_.wait(lock);
      continue;
    }
    if (changed_.wait_until(lock, deadline_) == std::cv_status::timeout && armed_ && !stop_ &&
        std::chrono::steady_clock::now() >= deadline_) {
      // Another thread may not call MPI here (MPI_THREAD_FUNNELED): the process ends, and
      // mpirun takes the job down with it.
      std::fprintf(stderr, "optiflow run: rank %d (host %s): %s; ending the job\n", session_.rank(),
                   session_.host().c_str(), timeout_message(seconds_, what_).c_str());
      std::fflush(stderr);
      std::_Exit(kTimedOut);
    }
  }
}

std::string timeout_message(double seconds, const std::string& what) {
  char text[32];
  std::snprintf(text, sizeof text, "%g", seconds);
  return "timed out after " + std::string(text) + " s in " + what;
}

NodePlace node_place(const MpiSession& session) {
  MPI_Comm node = MPI_COMM_NULL;
  check_mpi(MPI_Comm_split_type(MPI_COMM_WORLD, MPI_COMM_TYPE_SHARED, session.rank(), MPI_INFO_NULL,
                                &node),
            "MPI_Comm_split_type");
  NodePlace place;
  MPI_Comm_rank(node, &place.rank);
  MPI_Comm_size(node, &place.ranks);
  MPI_Comm_free(&node);
  return place;
}

std::vector<std::string> gather_hosts(const MpiSession& session) {
  std::vector<char> mine(MPI_MAX_PROCESSOR_NAME, '\0');
  session.host().copy(mine.data(), mine.size() - 1);
  std::vector<char> all(mine.size() * static_cast<std::size_t>(session.size()));
  check_mpi(MPI_Allgather(mine.data(), static_cast<int>(mine.size()), MPI_CHAR, all.data(),
                          static_cast<int>(mine.size()), MPI_CHAR, MPI_COMM_WORLD),
            "MPI_Allgather");
  std::vector<std::string> hosts;
  for (int r = 0; r < session.size(); ++r)
    hosts.emplace_back(all.data() + static_cast<std::size_t>(r) * mine.size());
  return hosts;
}

JobInfo describe_job(const MpiSession& session, const std::string& backend) {
  JobInfo job;
  job.backend = backend;
  job.ranks = session.size();
  job.hosts = gather_hosts(session);
  char version[MPI_MAX_LIBRARY_VERSION_STRING];
  int length = 0;
  check_mpi(MPI_Get_library_version(version, &length), "MPI_Get_library_version");
  job.library.assign(version, static_cast<std::size_t>(length));
  job.library = job.library.substr(0, job.library.find_first_of(",\n"));
  return job;
}

}  // namespace optiflow::hw_runner::detail
