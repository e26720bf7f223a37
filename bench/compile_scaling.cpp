// How compile time and memory grow with the cluster, for the program NCCL runs on DGX
// clusters: eight rings, one per NIC rail (datasets/programs/multi-ring.ofl), on a100x8 ..
// a100x128 (64 .. 1,024 GPUs). Goals: time per transfer flat (within 2x of a100x8's) up to
// 1,024 GPUs, and a100x128 in under 60 s and 4 GB.
//
// Each compile runs in a forked child, so that its peak memory (ru_maxrss from wait4) is its
// own and an address-space limit (--as-limit, default 8 GB) keeps a runaway case from taking
// the machine down. Each topology is compiled with and without verification. Times are the
// best of several runs for the small cases; "cpu" is the compile's processor time, which a
// busy machine disturbs less than the wall-clock time, and the ratio is taken on it.
// Not a Google Benchmark: a command printing one row per topology.
// Usage: optiflow_bench_compile_scaling [--hosts 8,16,32,64,128] [--as-limit BYTES] [--passes]
#include <sys/resource.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <ctime>
#include <fstream>
#include <sstream>
#include <string>
#include <vector>

#include "optiflow/compiler/compiler.hpp"
#include "optiflow/support/units.hpp"
#include "optiflow/topology/generators.hpp"

namespace {

using namespace optiflow;

// Runs are repeated while they add up to less than this, at most kMaxRuns times.
constexpr double kRepeatBelowSeconds = 1.0;
constexpr int kMaxRuns = 5;

struct Settings {
  std::vector<int> hosts{8, 16, 32, 64, 128};
  rlim_t as_limit = 8'000'000'000;
  bool passes = false;
};

// One compile, or why it failed.
struct Measurement {
  bool ok = false;
  std::string error;
  double seconds = 0, cpu_seconds = 0;
  std::size_t transfers = 0;
  long peak_kib = 0;
  std::string passes;  // " name=ms" per pass
};

std::string read_program() {
  std::ifstream in(std::string(OPTIFLOW_SOURCE_DIR) + "/datasets/programs/multi-ring.ofl");
  std::ostringstream text;
  text << in.rdbuf();
  return text.str();
}

double cpu_now() {
  timespec t{};
  clock_gettime(CLOCK_PROCESS_CPUTIME_ID, &t);
  return static_cast<double>(t.tv_sec) + static_cast<double>(t.tv_nsec) * 1e-9;
}

// Runs in the child: compiles once and writes "ok transfers seconds cpu passes..." or
// "error message".
std::string compile_once(const std::string& program, int hosts, bool verify) {
  try {
    const topology::Topology topo = topology::make_a100(hosts);
    compiler::CompileOptions options;
    options.verify = verify;
    const double cpu_start = cpu_now();
    const auto start = std::chrono::steady_clock::now();
    const auto result = compiler::compile_program(program, "multi-ring.ofl", topo, options);
    const std::chrono::duration<double> spent = std::chrono::steady_clock::now() - start;
    std::string line = "ok " + std::to_string(result.schedule.step_count() / 2) + " " +
                       std::to_string(spent.count()) + " " + std::to_string(cpu_now() - cpu_start);
    for (const auto& pass : result.passes)
      line += " " + pass.name + "=" + std::to_string(static_cast<long>(pass.millis));
    return line;
  } catch (const std::bad_alloc&) {
    return "error out of memory";
  } catch (const std::exception& e) {
    return std::string("error ") + e.what();
  }
}

Measurement parse_report(const std::string& text) {
  Measurement m;
  std::istringstream in(text);
  std::string word;
  in >> word;
  if (word != "ok") {
    std::getline(in, m.error);
    m.error = m.error.empty() ? "the child died (memory limit?)" : m.error.substr(1);
    return m;
  }
  m.ok = true;
  in >> m.transfers >> m.seconds >> m.cpu_seconds;
  std::getline(in, m.passes);
  return m;
}

Measurement measure_once(const std::string& program, int hosts, bool verify,
                         const Settings& settings) {
  int fds[2];
  if (pipe(fds) != 0) return parse_report("error pipe failed");
  const pid_t child = fork();
  if (child == 0) {
    close(fds[0]);
    const rlimit limit{settings.as_limit, settings.as_limit};
    setrlimit(RLIMIT_AS, &limit);
    const std::string line = compile_once(program, hosts, verify) + "\n";
    [[maybe_unused]] const auto written = write(fds[1], line.data(), line.size());
    _exit(0);
  }
  close(fds[1]);
  std::string text;
  char buffer[4096];
  for (ssize_t got; (got = read(fds[0], buffer, sizeof buffer)) > 0;)
    text.append(buffer, static_cast<std::size_t>(got));
  close(fds[0]);
  int status = 0;
  rusage usage{};
  wait4(child, &status, 0, &usage);
  Measurement m = parse_report(text);
  m.peak_kib = usage.ru_maxrss;
  return m;
}

// The best of a few runs for quick cases, one run for long ones.
Measurement measure(const std::string& program, int hosts, bool verify, const Settings& settings) {
  Measurement best = measure_once(program, hosts, verify, settings);
  double total = best.seconds;
  for (int run = 1; best.ok && run < kMaxRuns && total < kRepeatBelowSeconds; ++run) {
    const Measurement again = measure_once(program, hosts, verify, settings);
    total += again.seconds;
    if (again.ok && again.cpu_seconds < best.cpu_seconds) best = again;
  }
  return best;
}

double micros_per_transfer(const Measurement& m) {
  return support::us_of_seconds(m.cpu_seconds) / static_cast<double>(m.transfers);
}

void print_cell(const Measurement& m, const Measurement& first) {
  if (!m.ok) {
    std::printf(" | %-40s", "failed (below)");
    return;
  }
  const double ratio = first.ok ? micros_per_transfer(m) / micros_per_transfer(first) : 0;
  std::printf(" | %7.2f %7.2f %7.3f %5.2fx %6.0f", m.seconds, m.cpu_seconds, micros_per_transfer(m),
              ratio, static_cast<double>(m.peak_kib) / 1024);
}

Settings parse_settings(int argc, char** argv) {
  Settings s;
  for (int i = 1; i < argc; ++i) {
    const std::string arg = argv[i];
    if (arg == "--passes") {
      s.passes = true;
    } else if (arg == "--as-limit" && i + 1 < argc) {
      s.as_limit = std::stoull(argv[++i]);
    } else if (arg == "--hosts" && i + 1 < argc) {
      s.hosts.clear();
      std::istringstream list(argv[++i]);
      for (std::string item; std::getline(list, item, ',');) s.hosts.push_back(std::stoi(item));
    } else {
      std::fprintf(stderr, "usage: %s [--hosts 8,16,...] [--as-limit BYTES] [--passes]\n", argv[0]);
      std::exit(2);
    }
  }
  return s;
}

}  // namespace

int main(int argc, char** argv) {
  const Settings settings = parse_settings(argc, argv);
  const std::string program = read_program();
  std::printf(
      "multi-ring (8 rings, one per NIC rail), All-Gather. Per case: wall and cpu "
      "seconds, cpu us per transfer, its ratio to the first row's, peak MB\n");
  std::printf("%-9s %5s %9s | %-40s | %-40s\n", "topology", "GPUs", "transfers",
              "verified:   wall     cpu    us/t ratio     MB",
              "unverified: wall     cpu    us/t ratio     MB");
  Measurement first_verified, first_unverified;
  for (std::size_t i = 0; i < settings.hosts.size(); ++i) {
    const int hosts = settings.hosts[i];
    const Measurement verified = measure(program, hosts, true, settings);
    const Measurement unverified = measure(program, hosts, false, settings);
    if (i == 0) first_verified = verified, first_unverified = unverified;
    std::printf("a100x%-4d %5d %9zu", hosts, hosts * 8,
                verified.ok ? verified.transfers : unverified.transfers);
    print_cell(verified, first_verified);
    print_cell(unverified, first_unverified);
    std::printf("\n");
    for (const Measurement* m : {&verified, &unverified})
      if (!m->ok) std::printf("    %s\n", m->error.c_str());
    if (settings.passes) std::printf("    passes (ms):%s\n", verified.passes.c_str());
    std::fflush(stdout);
  }
  return 0;
}
