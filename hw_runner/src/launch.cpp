#include "optiflow/hw_runner/launch.hpp"

#include <fcntl.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <iterator>
#include <sstream>
#include <stdexcept>
#include <thread>

#include "optiflow/hw_runner/measure.hpp"

namespace optiflow::hw_runner {
namespace {

const char* env(const char* name) {
  const char* value = std::getenv(name);
  return value != nullptr && *value != '\0' ? value : nullptr;
}

std::vector<std::string> split_words(const std::string& text) {
  std::istringstream in(text);
  return {std::istream_iterator<std::string>(in), std::istream_iterator<std::string>()};
}

}  // namespace

bool inside_mpi_job() {
  for (const char* name : {"OMPI_COMM_WORLD_SIZE", "PMI_SIZE", "PMIX_RANK", "PMI_RANK"})
    if (env(name)) return true;
  // srun sets SLURM_PROCID in every task of a step; an sbatch script alone has no step.
  return env("SLURM_PROCID") && env("SLURM_STEP_ID");
}

std::vector<std::string> mpirun_command(const LaunchOptions& options,
                                        const std::vector<std::string>& command) {
  std::vector<std::string> argv{env("OPTIFLOW_MPIRUN") ? env("OPTIFLOW_MPIRUN") : options.mpirun,
                                "-np", std::to_string(options.np)};
  const bool open_mpi =
      argv[0].find("mpirun") != std::string::npos || argv[0].find("mpiexec") != std::string::npos;
  if (!options.hostfile.empty()) {
    argv.insert(argv.end(), {"--hostfile", options.hostfile});
  } else if (open_mpi) {
    // One host with fewer cores than ranks: Open MPI refuses without this, and binding each
    // rank to a core would stack them.
    argv.insert(argv.end(), {"--oversubscribe", "--bind-to", "none"});
  }
  if (open_mpi && geteuid() == 0) argv.push_back("--allow-run-as-root");
  argv.insert(argv.end(), options.extra_args.begin(), options.extra_args.end());
  if (env("OPTIFLOW_MPIRUN_ARGS")) {
    const auto extra = split_words(env("OPTIFLOW_MPIRUN_ARGS"));
    argv.insert(argv.end(), extra.begin(), extra.end());
  }
  argv.insert(argv.end(), command.begin(), command.end());
  return argv;
}

std::vector<std::string> own_command_line() {
  std::ifstream in("/proc/self/cmdline", std::ios::binary);
  const std::string text{std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>()};
  std::vector<std::string> words;
  for (std::size_t start = 0; start < text.size();) {
    const std::size_t end = text.find('\0', start);
    words.push_back(text.substr(start, end - start));
    if (end == std::string::npos) break;
    start = end + 1;
  }
  char self[4096];
  const ssize_t length = readlink("/proc/self/exe", self, sizeof self - 1);
  if (length > 0 && !words.empty()) words[0].assign(self, static_cast<std::size_t>(length));
  return words;
}

int launch(const LaunchOptions& options, const std::vector<std::string>& command) {
  const std::vector<std::string> argv_text = mpirun_command(options, command);
  std::vector<char*> argv;
  for (const std::string& word : argv_text) argv.push_back(const_cast<char*>(word.c_str()));
  argv.push_back(nullptr);
  std::fflush(nullptr);
  const pid_t child = fork();
  if (child < 0) throw std::runtime_error(std::string("fork failed: ") + std::strerror(errno));
  if (child == 0) {
    setpgid(0, 0);  // its own process group, so that a timeout can end every rank at once
    if (!options.output.empty()) {
      const int fd = open(options.output.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
      if (fd < 0 || dup2(fd, STDOUT_FILENO) < 0 || dup2(fd, STDERR_FILENO) < 0) {
        std::fprintf(stderr, "optiflow run: cannot write %s: %s\n", options.output.c_str(),
                     std::strerror(errno));
        std::_Exit(127);
      }
    }
    execvp(argv[0], argv.data());
    std::fprintf(stderr, "optiflow run: cannot start %s: %s\n", argv[0], std::strerror(errno));
    std::_Exit(127);
  }
  setpgid(child, child);
  const auto started = std::chrono::steady_clock::now();
  int status = 0;
  for (;;) {
    const pid_t waited = waitpid(child, &status, WNOHANG);
    if (waited == child) break;
    if (waited < 0 && errno != EINTR)
      throw std::runtime_error(std::string("waitpid failed: ") + std::strerror(errno));
    const std::chrono::duration<double> elapsed = std::chrono::steady_clock::now() - started;
    if (options.job_timeout_s > 0 && elapsed.count() > options.job_timeout_s) {
      std::fprintf(stderr, "optiflow run: the job did not end within %.0f s; killing it\n",
                   options.job_timeout_s);
      kill(-child, SIGTERM);
      std::this_thread::sleep_for(std::chrono::seconds(2));
      kill(-child, SIGKILL);
      waitpid(child, &status, 0);
      return kTimedOut;
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
  }
  if (WIFSIGNALED(status)) {
    std::fprintf(stderr, "optiflow run: %s was killed by signal %d\n", argv[0], WTERMSIG(status));
    return 128 + WTERMSIG(status);
  }
  return WEXITSTATUS(status);
}

}  // namespace optiflow::hw_runner
