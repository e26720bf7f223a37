// `optiflow explore`: the main job. A progress line while it runs, a table of per-size winners.
#include <unistd.h>

#include <cstdio>
#include <filesystem>
#include <iostream>
#include <memory>
#include <optional>
#include <stdexcept>

#include "commands.hpp"
#include "format.hpp"
#include "hw_measure.hpp"
#include "inputs.hpp"
#include "measured_runs.hpp"
#include "optiflow/baselines/baseline.hpp"
#include "optiflow/db/store.hpp"
#include "optiflow/explore/distributed.hpp"
#include "optiflow/explore/explore.hpp"
#include "optiflow/hw_runner/nccl_backend.hpp"
#include "optiflow/llm/llm_proposer.hpp"
#include "optiflow/llm/settings.hpp"
#include "optiflow/propose/proposer.hpp"
#include "optiflow/support/error.hpp"
#include "optiflow/support/sizes.hpp"

namespace optiflow::cli {
namespace {

// The model settings as flags; each flag given overrides the config file and the environment.
struct LlmFlags {
  std::string config, url, models, store;
  std::optional<double> timeout_s, temperature, max_cost;
  std::optional<std::int64_t> max_tokens, max_total_tokens;
  std::optional<int> concurrency, candidates, retries;
  bool max_completion_tokens = false, replay_only = false, no_cache = false, cache = false;

  llm::LlmSettings settings() const {
    llm::LlmSettings s = llm::load_settings(config);
    if (!url.empty()) s.server.url = url;
    if (!models.empty()) s.models = llm::parse_model_list(models, "--llm-model");
    if (!store.empty()) {
      if (store != "text" && store != "hashes")
        throw support::InputError(support::SourceLocation{"command line", 0, 0, "--llm-store"},
                                  "use text or hashes");
      s.store_text = store == "text";
    }
    if (timeout_s) s.server.timeout_s = *timeout_s;
    if (retries) s.server.retries = *retries;
    if (temperature) s.temperature = *temperature;
    if (max_cost) s.max_cost = *max_cost;
    if (max_tokens) s.max_tokens = *max_tokens;
    if (max_total_tokens) s.max_total_tokens = *max_total_tokens;
    if (concurrency) s.concurrency = *concurrency;
    if (candidates) s.candidates_per_call = *candidates;
    if (max_completion_tokens) s.use_max_completion_tokens = true;
    if (replay_only) s.replay_only = true;
    if (cache) s.use_cache = true;
    if (no_cache) s.use_cache = false;
    llm::validate(s);
    return s;
  }
};

struct ExploreArgs {
  explore::ExploreOptions options;
  std::string collective = "allgather", sizes = support::kDefaultSizes;
  std::string floor;  ///< empty: explore::default_floor
  std::int64_t resume = 0;
  std::string hw;  ///< --hw backend; empty: simulate only
  int hw_iters = 20;
  bool distributed = false;
  explore::DistributedOptions distributed_options;
  LlmFlags llm;
  std::optional<llm::LlmSettings> llm_settings;  // read once, when a proposer needs them

  const llm::LlmSettings& model_settings() {
    if (!llm_settings) llm_settings = llm.settings();
    return *llm_settings;
  }
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
                  const std::string& db, const std::string& hw) {
  std::cout << strprintf(
      "explore %s on %s: %lld candidates (%lld compiled and verified) in %.1f s; run %lld in %s\n",
      collective.c_str(), r.topology.c_str(), static_cast<long long>(r.candidates),
      static_cast<long long>(r.compiled), r.seconds, static_cast<long long>(r.run_id), db.c_str());
  if (!hw.empty())
    std::cout << strprintf("measured on %s: %lld schedules (%lld failed)\n", hw.c_str(),
                           static_cast<long long>(r.measured),
                           static_cast<long long>(r.measure_failed));
  std::cout << strprintf("\n%8s %11s %8s %8s %12s %10s", "size", "busbw GB/s", "x bound", "vs nccl",
                         "nccl runs", "flow GB/s");
  if (!hw.empty()) std::cout << strprintf(" %13s", "measured");
  std::cout << "  best program\n";
  for (const auto& w : r.winners) {
    const std::string versus =
        w.nccl.time_us > 0 ? strprintf("%7.2fx", w.nccl.time_us / w.simulated.time_us) : "      -";
    std::cout << strprintf("%8s %11.2f %8.3f %8s %12s %10.2f",
                           support::format_size(w.simulated.size_bytes).c_str(),
                           w.simulated.busbw_GBps, w.simulated.x_bound(), versus.c_str(),
                           w.nccl.choice.empty() ? "-" : w.nccl.choice.c_str(), w.flow_busbw_GBps);
    if (!hw.empty())
      std::cout << (w.measured_time_us > 0 ? strprintf(" %10.2f us", w.measured_time_us)
                                           : strprintf(" %13s", "-"));
    if (w.baseline.empty())
      std::cout << strprintf("  #%lld %s\n", static_cast<long long>(w.program_id),
                             short_program(w.program_source).c_str());
    else
      std::cout << strprintf("  baseline %s (no program beat it here)\n", w.baseline.c_str());
  }
  std::cout << "\nx bound: time / lower bound (1 = the network's limit); vs nccl: speed-up over "
               "what NCCL's tuner\n"
               "picks at that size (nccl runs: its algorithm/protocol), simulated in the same "
               "cost model;\nflow: the winner in the flow model.\n";
  if (!hw.empty())
    std::cout << "measured: the winner's time on " << hw
              << " (- not measured); at a size where some candidate was measured,\n"
                 "the winner is the fastest measured one (the other columns: its simulated "
                 "figures).\n";
  if (r.hw_fidelity && r.hw_fidelity->points > 0)
    std::cout << "the pre-screen against " << hw << " (" << r.hw_fidelity->points
              << " measured points; optiflow fidelity): " << fidelity_summary(*r.hw_fidelity)
              << "\n";
  if (!r.nccl_missing.empty()) std::cout << "no NCCL column: " << r.nccl_missing << "\n";
  for (const std::string& missing : r.floor_missing)
    std::cout << "not in the floor: " << missing << "\n";
  if (!r.winners.empty())
    std::cout
        << "schedules: "
        << r.winners.front().schedule_path.substr(0, r.winners.front().schedule_path.rfind('/'))
        << "/<collective>-<topology>-<size>.json and .xml; programs: optiflow history program ID\n";
}

bool uses_model(const std::string& proposer) {
  return proposer == "llm" || proposer == "hybrid";
}

// The proposers this build offers, by --proposer name.
propose::ProposerFactory proposer_factory(ExploreArgs& args) {
  return [&args](const std::string& name,
                 const propose::ProposalContext& context) -> std::unique_ptr<propose::Proposer> {
    if (name == "offline") return propose::make_offline_proposer(context);
    if (uses_model(name)) {
      auto model = llm::make_llm_proposer(context, args.model_settings(), args.options.db_path);
      if (name == "llm") return model;
      return propose::make_hybrid_proposer(std::move(model),
                                           propose::make_offline_proposer(context));
    }
    throw support::InputError(support::SourceLocation{"command line", 0, 0, "--proposer"},
                              "unknown proposer '" + name + "' (offline | llm | hybrid)");
  };
}

void print_model_calls(const explore::ExploreResult& r, const std::string& db) {
  const db::ModelCallTotals t = db::Store::open(db).model_call_totals(r.run_id);
  if (t.calls == 0) return;
  std::cout << model_call_totals_line(t)
            << strprintf("; optiflow history calls %lld\n", static_cast<long long>(r.run_id));
}

// A scratch directory, removed when the run ends however it ends.
struct WorkDir {
  std::filesystem::path path;
  ~WorkDir() {
    std::error_code ignored;
    if (!path.empty()) std::filesystem::remove_all(path, ignored);
  }
};

// --hw: each measurement is `optiflow run` under the launcher; it stores its results in the
// run's database, by schedule hash, beside the candidates.
void set_up_measurement(ExploreArgs& args, const std::filesystem::path& work) {
  const support::SourceLocation where{"command line", 0, 0, "--hw"};
  if (args.hw != "mpi" && args.hw != "nccl")
    throw support::InputError(where, "unknown backend '" + args.hw + "' (mpi or nccl)");
  if (args.hw == "nccl" && !hw_runner::nccl_backend_built())
    throw support::InputError(where, "this optiflow was built without CUDA and NCCL");
  if (args.options.hw_topk < 1)
    throw support::InputError(support::SourceLocation{"command line", 0, 0, "--hw-topk"},
                              "measure at least 1 candidate per batch");
  std::filesystem::create_directories(work);
  args.options.hw_backend = args.hw;
  args.options.measure = [&args, work](const schedule::Schedule& schedule,
                                       const std::string& topology,
                                       std::span<const std::uint64_t> sizes) {
    HwRun run;
    run.backend = args.hw;
    run.topology = topology;
    run.sizes.assign(sizes.begin(), sizes.end());
    run.iters = args.hw_iters;
    run.db = args.options.db_path;
    run.work = work;
    run.log = work / "job.log";
    return std::optional<std::vector<double>>(run_on_hardware(schedule, run));
  };
}

// --floor: `none`, or baselines by name.
std::vector<std::string> parse_floor(const std::string& text) {
  if (text == "none") return {};
  const std::vector<std::string> names = split_list(text);
  for (const std::string& name : names)
    if (!baselines::is_baseline(name))
      throw support::OptionError("floor", "no baseline named '" + name + "'; use none or some of " +
                                              baselines::baseline_list());
  return names;
}

void run_explore(ExploreArgs& args) {
  args.options.collective = parse_collective(args.collective);
  args.options.sizes = support::parse_sizes(args.sizes);
  if (!args.floor.empty()) args.options.floor = parse_floor(args.floor);
  if (args.resume > 0) args.options.resume = args.resume;
  if (uses_model(args.options.proposer)) args.model_settings();  // bad ones fail before the run
  WorkDir work;
  if (!args.hw.empty()) {
    work.path =
        std::filesystem::temp_directory_path() / ("optiflow-explore-" + std::to_string(getpid()));
    set_up_measurement(args, work.path);
  }
  ProgressLine progress;
  args.options.warn = [&progress](const std::string& message) {
    progress.finish();
    std::cerr << "warning: " << message << "\n";
  };
  const explore::ProgressSink sink = [&](const explore::Progress& p) { progress(p); };
  std::optional<explore::DistributedJob> job;
  if (args.distributed) {
    if (!args.hw.empty())
      throw support::OptionError("distributed",
                                 "cannot be combined with --hw (a measurement starts its own MPI "
                                 "job); explore with --hw in one process");
    job.emplace();
  }
  const std::optional<explore::ExploreResult> maybe_result =
      job ? job->explore(args.options, proposer_factory(args), sink, args.distributed_options)
          : explore::explore(args.options, proposer_factory(args), sink);
  if (!maybe_result) return;  // a rank that evaluated for rank 0
  const explore::ExploreResult& result = *maybe_result;
  progress.finish();
  print_result(result, args.collective, args.options.db_path, args.hw);
  print_model_calls(result, args.options.db_path);
  if (!result.stop_reason.empty())
    std::cout << "stopped before the budget: " << result.stop_reason << "\n";
  if (!result.failure.empty())
    throw std::runtime_error("the run failed (what it stored is kept): " + result.failure);
}

void add_llm_options(CLI::App& cmd, LlmFlags& f) {
  const char* group = "Language model (--proposer llm|hybrid; docs/llm.md)";
  cmd.add_option("--llm-config", f.config, "JSON file of model settings")->group(group);
  cmd.add_option("--llm-url", f.url,
                 "server base URL, e.g. http://localhost:8000/v1 "
                 "(default: $OPTIFLOW_LLM_URL)")
      ->group(group);
  cmd.add_option("--llm-model", f.models,
                 "model names, comma-separated, each optionally name:weight "
                 "(default: $OPTIFLOW_LLM_MODEL)")
      ->group(group);
  cmd.add_option("--llm-timeout", f.timeout_s,
                 "seconds per request (default: $OPTIFLOW_LLM_TIMEOUT or 120)")
      ->group(group);
  cmd.add_option("--llm-retries", f.retries, "retries after a timeout, 429 or 5xx (default 4)")
      ->group(group);
  cmd.add_option("--llm-temperature", f.temperature, "sampling temperature (default 0.7)")
      ->group(group);
  cmd.add_option("--llm-max-tokens", f.max_tokens, "completion tokens per reply (default 4096)")
      ->group(group);
  cmd.add_flag("--llm-max-completion-tokens", f.max_completion_tokens,
               "send max_completion_tokens (reasoning models) instead of max_tokens")
      ->group(group);
  cmd.add_option("--llm-concurrency", f.concurrency, "requests in flight at once (default 4)")
      ->group(group);
  cmd.add_option("--llm-candidates", f.candidates, "programs asked for per reply (default 4)")
      ->group(group);
  cmd.add_option("--llm-max-total-tokens", f.max_total_tokens,
                 "stop the run once its calls used this many tokens")
      ->group(group);
  cmd.add_option("--llm-max-cost", f.max_cost,
                 "stop the run once its calls cost this much (prices: --llm-config)")
      ->group(group);
  cmd.add_option("--llm-store", f.store,
                 "text | hashes: what the store keeps of prompts and replies")
      ->group(group);
  cmd.add_flag("--replay-only", f.replay_only,
               "answer every request from recorded replies; fail on one that was not recorded")
      ->group(group);
  cmd.add_flag("--cache", f.cache,
               "answer a request recorded before (same prompt, seed and call number) from the "
               "store")
      ->group(group);
  cmd.add_flag("--no-cache", f.no_cache,
               "always call the server, even for a recorded request (the default)")
      ->group(group);
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
  cmd->add_option("--proposer", args->options.proposer, "offline | llm | hybrid")
      ->capture_default_str();
  cmd->add_option("--seed", args->options.seed, "random seed")->capture_default_str();
  cmd->add_option("--db", args->options.db_path, "SQLite database")->capture_default_str();
  cmd->add_option("--resume", args->resume, "continue run RUN of the database");
  cmd->add_option("--out", args->options.out_dir, "where the winners' schedules go")
      ->capture_default_str();
  cmd->add_option("--threads", args->options.threads, "worker threads (0: all cores)");
  cmd->add_option("--floor", args->floor,
                  "baselines whose schedules hold each size until a program beats them (none, "
                  "or names as optiflow baseline takes them; default: nccl,forestcoll, and taccl "
                  "too on up to 8 GPUs)");
  cmd->add_option("--floor-time-limit", args->options.floor_time_limit_s,
                  "the floor's synthesizers: seconds per solver call, behind their node limit")
      ->check(CLI::PositiveNumber)
      ->capture_default_str();
  const char* hw = "Hardware (docs/explore.md)";
  cmd->add_option("--hw", args->hw,
                  "mpi | nccl: also run the best candidates of each batch for real; measured "
                  "times then pick the winners")
      ->group(hw);
  cmd->add_option("--hw-topk", args->options.hw_topk, "candidates measured per batch")
      ->capture_default_str()
      ->group(hw);
  cmd->add_option("--hw-iters", args->hw_iters, "timed iterations per size of a measurement")
      ->capture_default_str()
      ->group(hw);
  const char* cluster = "Cluster (docs/cluster.md)";
  cmd->add_flag("--distributed", args->distributed,
                "under mpirun or srun: rank 0 explores, every rank evaluates candidates")
      ->group(cluster);
  cmd->add_option("--rank-timeout", args->distributed_options.rank_timeout_s,
                  "with --distributed: seconds a rank may hold one candidate before it is given "
                  "up and the candidate evaluated elsewhere")
      ->capture_default_str()
      ->check(CLI::PositiveNumber)
      ->group(cluster);
  add_llm_options(*cmd, args->llm);
  cmd->callback([args] { run_explore(*args); });
}

}  // namespace optiflow::cli
