// Hostile programs are rejected before the memory they would need is spent. Each compile runs
// in a forked child under an address-space limit (kMemoryLimit) and a processor-time limit, so
// a program that allocates first and checks later fails here by running out of memory or
// time, not by being slow; the child reports the error it got and the parent checks it names
// the statement responsible and that the child's peak resident memory stayed under the limit.
// The last case lifts the limits to show that the harness does catch a compile that spends
// the memory. Under AddressSanitizer, which reserves terabytes of address space for its
// shadow memory, only the peak resident memory is checked.
#include <gtest/gtest.h>
#include <sys/resource.h>
#include <sys/wait.h>
#include <unistd.h>

#include <functional>
#include <string>
#include <type_traits>

#include "optiflow/compiler/compiler.hpp"
#include "optiflow/dsl/parser.hpp"
#include "optiflow/topology/generators.hpp"

namespace optiflow::compiler {
namespace {

constexpr rlim_t kMemoryLimit = 300u << 20;
constexpr rlim_t kCpuSeconds = 10;

#if defined(__SANITIZE_ADDRESS__)
constexpr bool kAddressSpaceLimitWorks = false;
#elif defined(__has_feature)
#if __has_feature(address_sanitizer)
constexpr bool kAddressSpaceLimitWorks = false;
#else
constexpr bool kAddressSpaceLimitWorks = true;
#endif
#else
constexpr bool kAddressSpaceLimitWorks = true;
#endif

struct ChildReport {
  bool exited = false;  // false: killed (a signal, e.g. the processor-time limit)
  std::string text;     // what the child wrote: the compile's error, "compiled" or "no memory"
  std::size_t peak_resident_bytes = 0;
};

// Runs `body` in a child process under kMemoryLimit and kCpuSeconds.
ChildReport run_limited(const std::function<std::string()>& body) {
  int fds[2];
  if (pipe(fds) != 0) return {};
  const pid_t child = fork();
  if (child == 0) {
    close(fds[0]);
    const rlimit memory{kMemoryLimit, kMemoryLimit}, cpu{kCpuSeconds, kCpuSeconds};
    if (kAddressSpaceLimitWorks) setrlimit(RLIMIT_AS, &memory);
    setrlimit(RLIMIT_CPU, &cpu);
    std::string text;
    try {
      text = body();
    } catch (const std::bad_alloc&) {
      text = "no memory";
    }
    [[maybe_unused]] const auto written = write(fds[1], text.data(), text.size());
    _exit(0);
  }
  close(fds[1]);
  ChildReport report;
  char buffer[4096];
  for (ssize_t got; (got = read(fds[0], buffer, sizeof buffer)) > 0;)
    report.text.append(buffer, static_cast<std::size_t>(got));
  close(fds[0]);
  int status = 0;
  rusage usage{};
  wait4(child, &status, 0, &usage);
  report.exited = WIFEXITED(status);
  report.peak_resident_bytes = static_cast<std::size_t>(usage.ru_maxrss) * 1024;  // KiB on Linux
  return report;
}

// Compiles `text` as `source` in a limited child; returns the rejection, rendered.
ChildReport compile_limited(const std::string& text, const std::string& source, int hosts,
                            const CompileOptions& options = {}) {
  return run_limited([&]() -> std::string {
    const topology::Topology topo = topology::make_a100(hosts);
    try {
      compile_program(text, source, topo, options);
      return "compiled";
    } catch (const dsl::DslError& e) {
      return e.render();
    }
  });
}

void expect_rejected(const ChildReport& report, const std::string& where,
                     const std::string& message) {
  ASSERT_TRUE(report.exited) << "the child was killed (processor-time limit?)";
  EXPECT_LT(report.peak_resident_bytes, kMemoryLimit);
  EXPECT_TRUE(report.text.starts_with(where)) << report.text;
  EXPECT_NE(report.text.find(message), std::string::npos) << report.text;
}

// As a model might write them: both need 8,192 and 2,048 pieces cut into 64 slices each.
TEST(CompilerLimits, PipelinedSplitIsRejectedAtTheSplitWithinMemory) {
  expect_rejected(compile_limited("pipeline 64\nchannels 32\nsplit 64 as r { ring over all }\n",
                                  "many.ofl", 16),
                  "many.ofl:3:1: error:", "524288 chunks per buffer with pipeline 64");
  expect_rejected(
      compile_limited("pipeline 64\nsplit 16 as r { ring over all }\n", "fewer.ofl", 16),
      "fewer.ofl:2:1: error:", "131072 chunks per buffer");
}

// The depth is known before the split runs, so nothing is spent on what it would slice.
TEST(CompilerLimits, APipelineAfterTheStepsCountsFromTheFirstStep) {
  expect_rejected(
      compile_limited("let k = 64\nsplit k as r { ring over all }\npipeline k\n", "late.ofl", 16),
      "late.ofl:2:1: error:", "524288 chunks per buffer with pipeline 64");
  CompileOptions options;
  options.limits.max_transfers = 100'000;
  expect_rejected(compile_limited("ring over all\npipeline 8\n", "late.ofl", 16, options),
                  "late.ofl:1:1: error:", "more than 100000 transfers (counting each of the 8");
}

TEST(CompilerLimits, TransfersCountEveryPipelineSliceAndAllReducePhase) {
  CompileOptions options;
  options.limits.max_transfers = 100'000;
  // 128 ranks: a ring makes 16,256 transfers; 8 slices of it make 130,048.
  expect_rejected(compile_limited("pipeline 8\nring over all\n", "sliced.ofl", 16, options),
                  "sliced.ofl:2:1: error:", "more than 100000 transfers");
  options.collective = support::Collective::all_reduce;
  options.limits.max_transfers = 20'000;  // one phase fits, both do not
  expect_rejected(compile_limited("ring over all\n", "twice.ofl", 16, options),
                  "twice.ofl:1:1: error:", "once per phase");
}

TEST(CompilerLimits, AllReduceJoinsAreCountedBeforeTheyAreStored) {
  // 512 ranks: each owner's 511 sends each wait for its 511 reductions, 134 million in all.
  CompileOptions options;
  options.collective = support::Collective::all_reduce;
  expect_rejected(compile_limited("direct over all\n", "direct.ofl", 64, options),
                  "direct.ofl:1:1: error:", "waits for more than 16777216 reductions");
}

TEST(CompilerLimits, TheHarnessCatchesACompileThatSpendsTheMemory) {
  if (!kAddressSpaceLimitWorks)
    GTEST_SKIP() << "without an address-space limit the control case would take gigabytes";
  CompileOptions options;
  options.limits.max_chunks = std::int64_t{1} << 40;
  options.limits.max_transfers = std::size_t{1} << 40;
  const ChildReport report = compile_limited("pipeline 64\nsplit 16 as r { ring over all }\n",
                                             "unlimited.ofl", 16, options);
  EXPECT_TRUE(!report.exited || report.text == "no memory") << report.text;
}

TEST(CompilerLimits, ATimeLimitStopsTheCompile) {
  CompileOptions options;
  options.time_limit_s = 1e-9;
  const topology::Topology topo = topology::make_a100(4);
  try {
    compile_program("ring over all\n", "slow.ofl", topo, options);
    ADD_FAILURE() << "expected the time limit to stop it";
  } catch (const TimeLimitError& e) {
    EXPECT_NE(std::string(e.what()).find("time limit"), std::string::npos) << e.what();
    EXPECT_EQ(std::string(e.what()).rfind("slow.ofl: error: ", 0), 0u) << e.what();
  }
}

static_assert(!std::is_base_of_v<support::InputError, TimeLimitError>,
              "running out of time is not the user's input being wrong");

// ---- Compiler bugs are not input errors --------------------------------------------------

static_assert(!std::is_base_of_v<support::InputError, InternalError>,
              "a compiler bug must not be reported as the user's mistake");

TEST(CompilerLimits, InconsistentIndexListsAreAnInternalError) {
  EXPECT_THROW(IndexLists({0, 3}, {1, 2}), InternalError);
  EXPECT_THROW(IndexLists({}, {}), InternalError);
  const IndexLists lists({0, 1, 3}, {7, 8, 9});
  ASSERT_EQ(lists.size(), 2u);
  EXPECT_EQ(lists[1].size(), 2u);
  EXPECT_EQ(lists[1][1], 9);
}

}  // namespace
}  // namespace optiflow::compiler
