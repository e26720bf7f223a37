// `optiflow explore`: the main job. A progress line while it runs, a table of per-size winners.
#include <unistd.h>

#include <cstdio>
#include <iostream>
#include <memory>

#include "commands.hpp"
#include "format.hpp"
#include "inputs.hpp"
#include "optiflow/explore/explore.hpp"
#include "optiflow/propose/proposer.hpp"
#include "optiflow/support/error.hpp"
#include "optiflow/support/sizes.hpp"

namespace optiflow::cli {
namespace {

struct ExploreArgs {
  explore::ExploreOptions options;
  std::string collective = "allgather", sizes = "1K:1G";
  std::int64_t resume = 0;
};

// One line on a terminal, rewritten in place; elsewhere a line every tenth of the budget.
class ProgressLine {
 public:
  ProgressLine() : tty_(isatty(STDERR_FILENO) != 0) {}
  ~ProgressLine() { finish(); }

  /// Ends the in-place line so that what follows starts on a fresh one.
  void finish() {
    if (tty_ && drawn_) std::fputs("\n", stderr);
    drawn_ = false;
  }

  void operator()(const explore::Progress& p) {
    const std::int64_t tenth = std::max<std::int64_t>(1, p.budget / 10);
    if (!tty_ && p.done / tenth == last_tenth_ && p.done < p.budget) return;
    last_tenth_ = p.done / tenth;
    std::string line = strprintf("[%4lld/%lld %5.1fs]", static_cast<long long>(p.done),
                                 static_cast<long long>(p.budget), p.seconds);
    const std::size_t shown[] = {0, p.sizes.size() / 2, p.sizes.size() - 1};
    for (std::size_t s : shown)
      if (s < p.sizes.size() && p.best_bound_ratio[s] > 0)
        line += strprintf("  %s %.1f GB/s x%.2f", support::format_size(p.sizes[s]).c_str(),
                          p.best_busbw_GBps[s], p.best_bound_ratio[s]);
    std::fprintf(stderr, tty_ ? "\r%-100s" : "%s\n", line.c_str());
    std::fflush(stderr);
    drawn_ = true;
  }

 private:
  bool tty_;
  bool drawn_ = false;
  std::int64_t last_tenth_ = -1;
};

std::string short_program(const std::string& text) {
  std::string line = one_line(text);
  return line.size() > 60 ? line.substr(0, 57) + "..." : line;
}

void print_result(const explore::ExploreResult& r, const std::string& collective,
                  const std::string& db) {
  std::cout << strprintf(
      "explore %s on %s: %lld candidates (%lld compiled and verified) in %.1f s; run %lld in %s\n",
      collective.c_str(), r.topology.c_str(), static_cast<long long>(r.candidates),
      static_cast<long long>(r.compiled), r.seconds, static_cast<long long>(r.run_id), db.c_str());
  std::cout << strprintf("\n%8s %11s %8s %8s %12s %10s  %s\n", "size", "busbw GB/s", "x bound",
                         "vs nccl", "nccl runs", "flow GB/s", "best program");
  for (const auto& w : r.winners) {
    const std::string versus =
        w.nccl_time_us > 0 ? strprintf("%7.2fx", w.nccl_time_us / w.time_us) : "      -";
    std::cout << strprintf(
        "%8s %11.2f %8.3f %8s %12s %10.2f  #%lld %s\n", support::format_size(w.size_bytes).c_str(),
        w.busbw_GBps, w.time_us / w.bound_us, versus.c_str(),
        w.nccl_choice.empty() ? "-" : w.nccl_choice.c_str(), w.flow_busbw_GBps,
        static_cast<long long>(w.program_id), short_program(w.program_source).c_str());
  }
  std::cout << "\nx bound: time / lower bound (1 = the network's limit); vs nccl: speed-up over "
               "what NCCL's tuner\n"
               "picks at that size (nccl runs: its algorithm/protocol), simulated in the same "
               "cost model;\nflow: the winner in the flow model.\n";
  if (!r.nccl_missing.empty()) std::cout << "no NCCL column: " << r.nccl_missing << "\n";
  if (!r.winners.empty())
    std::cout
        << "schedules: "
        << r.winners.front().schedule_path.substr(0, r.winners.front().schedule_path.rfind('/'))
        << "/<collective>-<topology>-<size>.json and .xml; programs: optiflow history program ID\n";
}

// The proposers this build offers, by --proposer name.
std::unique_ptr<propose::Proposer> make_proposer(const std::string& name,
                                                 const propose::ProposalContext& context) {
  if (name == "offline") return propose::make_offline_proposer(context);
  throw support::InputError(support::SourceLocation{"command line", 0, 0, "--proposer"},
                            "proposer '" + name + "' is not available yet: use --proposer offline");
}

void run_explore(ExploreArgs& args) {
  args.options.collective = parse_collective(args.collective);
  args.options.sizes = support::parse_sizes(args.sizes);
  if (args.resume > 0) args.options.resume = args.resume;
  ProgressLine progress;
  const auto result = explore::explore(args.options, make_proposer,
                                       [&](const explore::Progress& p) { progress(p); });
  progress.finish();
  print_result(result, args.collective, args.options.db_path);
}

}  // namespace

void add_explore_command(CLI::App& app) {
  auto* cmd = app.add_subcommand(
      "explore", "Search for fast schedules: propose, compile, verify, simulate, refine");
  auto args = std::make_shared<ExploreArgs>();
  cmd->add_option("--topo", args->options.topology, "built-in name or topology JSON file")
      ->capture_default_str();
  cmd->add_option("--collective", args->collective, "allgather | reducescatter | allreduce")
      ->capture_default_str();
  cmd->add_option("--sizes", args->sizes, "sizes per rank: 1K:1G, 4K,64M")->capture_default_str();
  cmd->add_option("--budget", args->options.budget, "candidates to evaluate")
      ->capture_default_str()
      ->check(CLI::Range(1, 1000000));
  cmd->add_option("--time-limit", args->options.time_limit_s,
                  "stop after this many seconds (0: none)");
  cmd->add_option("--proposer", args->options.proposer, "offline | llm")->capture_default_str();
  cmd->add_option("--seed", args->options.seed, "random seed")->capture_default_str();
  cmd->add_option("--db", args->options.db_path, "SQLite database")->capture_default_str();
  cmd->add_option("--resume", args->resume, "continue run RUN of the database");
  cmd->add_option("--out", args->options.out_dir, "where the winners' schedules go")
      ->capture_default_str();
  cmd->add_option("--threads", args->options.threads, "worker threads (0: all cores)");
  cmd->callback([args] { run_explore(*args); });
}

}  // namespace optiflow::cli
