// `optiflow run SCHED|PROG --topo T --backend mpi|nccl`: runs a schedule on real hardware,
// nccl-tests style, beside the library's own collective, and stores the measurements.
// Started by hand it re-executes itself under mpirun; started by mpirun or srun it is a rank.
#include <unistd.h>

#include <cstdio>
#include <cstdlib>
#include <iostream>
#include <memory>
#include <nlohmann/json.hpp>
#include <optional>

#include "commands.hpp"
#include "inputs.hpp"
#include "optiflow/db/store.hpp"
#include "optiflow/hw_runner/launch.hpp"
#include "optiflow/hw_runner/mpi_backend.hpp"
#include "optiflow/hw_runner/nccl_backend.hpp"
#include "optiflow/schedule/schedule_io.hpp"
#include "optiflow/support/error.hpp"
#include "optiflow/support/sizes.hpp"
#include "optiflow/topology/bounds.hpp"
#include "optiflow/topology/topology_io.hpp"

namespace optiflow::cli {
namespace {

struct RunArgs {
  std::string input, topology, backend = "mpi", collective = "allgather", sizes = "1K:1M";
  std::string hostfile, db = "optiflow.db", results_json;
  int np = 0;
  bool no_verify = false, no_store = false, no_native = false;
  hw_runner::RunOptions options;
};

bool holds_schedule(const std::string& path) {
  const std::string text = read_text_file(path);
  const auto first = text.find_first_not_of(" \t\r\n\xEF\xBB\xBF");
  return first != std::string::npos && (text[first] == '{' || text[first] == '<');
}

// --no-verify skips the static verifier for schedule files, so that the runner's own data
// check is what catches a wrong schedule. Programs are always compiled (which verifies).
schedule::Schedule load(const RunArgs& args, const topology::Topology& topo) {
  if (args.no_verify && holds_schedule(args.input)) return schedule::read_schedule_file(args.input);
  return load_schedule(args.input, topo, parse_collective(args.collective));
}

/// Rank 0's side of a job: the table on stdout, the measurements in the store.
class ResultSink {
 public:
  ResultSink(const RunArgs& args, const topology::Topology& topo, const schedule::Schedule& s)
      : args_(args), topo_(topo), schedule_(s), hash_(schedule::schedule_hash(s)) {}

  hw_runner::Reporter reporter() {
    return {[this](const hw_runner::JobInfo& job) { start(job); },
            [this](const hw_runner::SizeResult& result) { add(result); }};
  }

 private:
  void start(const hw_runner::JobInfo& job) {
    job_ = job;
    const std::string native =
        args_.backend == "nccl"
            ? hw_runner::nccl_native_name(schedule_.collective)
            : hw_runner::mpi_native_name(schedule_.collective, args_.options.native_algorithm);
    std::cout << hw_runner::table_header(job, schedule_, args_.options, native) << std::flush;
    if (args_.no_store) return;
    store_.emplace(db::Store::open(args_.db));
    topology_id_ = store_->put_topology(topo_.name(), topology::write_topology_json(topo_));
    store_->put_schedule(hash_, schedule::write_schedule_json(schedule_), schedule_.chunks,
                         static_cast<std::int64_t>(schedule_.step_count()));
    try {
      bound_.emplace(topology::LowerBound::compute(topo_, schedule_.collective));
    } catch (const support::UnsupportedError&) {
      // A topology without a finite bound still gets its measurements stored (bound 0).
    }
  }

  void add(const hw_runner::SizeResult& result) {
    std::cout << hw_runner::table_row(result) << std::flush;
    write_results_json(result);
    for (const hw_runner::Measurement* m : {&result.schedule, &result.native})
      if (m->wrong > 0)
        std::cerr << "optiflow run: wrong data: " << m->name << " at "
                  << support::format_size(result.size_bytes) << " left " << m->wrong
                  << " wrong elements (over all ranks); not a result\n";
    if (!store_ || !result.schedule.measured) return;
    support::SizeResult row{result.size_bytes, result.schedule.time_us, result.schedule.algbw_GBps,
                            result.schedule.busbw_GBps,
                            bound_ ? bound_->at(result.size_bytes).time_us : 0.0};
    store_->record_hw_result(hash_, topology_id_, args_.backend, row, host_info(result));
  }

  // For `optiflow calibrate`, which runs schedules through this command.
  void write_results_json(const hw_runner::SizeResult& result) {
    if (args_.results_json.empty()) return;
    results_.push_back({{"size_bytes", result.size_bytes},
                        {"time_us", result.schedule.time_us},
                        {"wrong", result.schedule.wrong},
                        {"native_time_us", result.native.time_us}});
    write_text_file(args_.results_json, results_.dump(1) + "\n");
  }

  std::string host_info(const hw_runner::SizeResult& result) const {
    nlohmann::json hosts = nlohmann::json::array();
    for (const std::string& host : job_.hosts)
      if (hosts.empty() || hosts.back() != host) hosts.push_back(host);
    nlohmann::json info{{"host", job_.hosts.empty() ? "" : job_.hosts[0]},
                        {"hosts", hosts},
                        {"ranks", job_.ranks},
                        {"library", job_.library},
                        {"optiflow", "0.1.0"},
                        {"schedule_hash", hash_},
                        {"warmup_iters", args_.options.warmup_iters},
                        {"iters", args_.options.iters},
                        {"elements", result.elements}};
    if (!job_.devices.empty()) info["devices"] = job_.devices;
    if (result.native.measured)
      info["native"] = {{"name", result.native.name},
                        {"time_us", result.native.time_us},
                        {"algbw_GBps", result.native.algbw_GBps},
                        {"busbw_GBps", result.native.busbw_GBps}};
    return info.dump();
  }

  const RunArgs& args_;
  const topology::Topology& topo_;
  const schedule::Schedule& schedule_;
  std::string hash_;
  hw_runner::JobInfo job_;
  std::optional<db::Store> store_;
  std::optional<topology::LowerBound> bound_;
  db::Id topology_id_ = 0;
  nlohmann::json results_ = nlohmann::json::array();
};

[[noreturn]] void finish(int status) {
  std::fflush(nullptr);
  std::exit(status);
}

void run_rank(RunArgs& args, const topology::Topology& topo) {
  const schedule::Schedule s = load(args, topo);
  ResultSink sink(args, topo, s);
  const int status = args.backend == "nccl"
                         ? hw_runner::run_nccl_job(s, args.options, sink.reporter())
                         : hw_runner::run_mpi_job(s, args.options, sink.reporter());
  finish(status);
}

void launch_job(RunArgs& args, const topology::Topology& topo) {
  const schedule::Schedule s = load(args, topo);
  if (args.np != 0 && args.np != s.ranks)
    throw support::InputError(
        support::SourceLocation{"command line", 0, 0, "--np"},
        "the schedule has " + std::to_string(s.ranks) + " ranks, not " + std::to_string(args.np));
  if (!args.options.native_algorithm.empty())
    hw_runner::open_mpi_algorithm(s.collective, args.options.native_algorithm);  // fails early
  hw_runner::LaunchOptions launch;
  launch.np = s.ranks;
  launch.hostfile = args.hostfile;
  // Each execution, barrier and reduction has its own timeout; this bounds the whole job.
  const double phases = static_cast<double>(args.options.sizes.size()) *
                            (2.0 * (args.options.warmup_iters + args.options.iters) + 8) +
                        8;
  launch.job_timeout_s = args.options.timeout_s * phases + 120;
  const int status = hw_runner::launch(launch, hw_runner::own_command_line());
  if (status == hw_runner::kWrongData)
    std::cerr << "optiflow run: the job produced wrong data (see above)\n";
  else if (status == hw_runner::kNoDevice)
    std::cerr << "optiflow run: skipped: no GPU for the NCCL backend\n";
  else if (status != 0)
    std::cerr << "optiflow run: the job failed (launcher exit status " << status << ")\n";
  finish(status);
}

void run(RunArgs& args) {
  if (args.backend != "mpi" && args.backend != "nccl")
    throw support::InputError(support::SourceLocation{"command line", 0, 0, "--backend"},
                              "unknown backend '" + args.backend + "' (mpi or nccl)");
  if (args.backend == "nccl" && !hw_runner::nccl_backend_built())
    throw support::InputError(support::SourceLocation{"command line", 0, 0, "--backend"},
                              "this optiflow was built without CUDA and NCCL");
  if (args.options.iters < 1 || args.options.warmup_iters < 0 || args.options.timeout_s <= 0)
    throw support::InputError(support::SourceLocation{"command line", 0, 0, "--iters"},
                              "--iters must be >= 1, --warmup >= 0 and --timeout > 0");
  args.options.sizes = support::parse_sizes(args.sizes);
  args.options.native = !args.no_native;
  if (!args.options.native_algorithm.empty() && (args.backend != "mpi" || args.no_native))
    throw support::InputError(support::SourceLocation{"command line", 0, 0, "--native-algorithm"},
                              "names the algorithm of Open MPI's own collective: needs --backend "
                              "mpi and the native column (not --no-native)");
  const topology::Topology topo = topology::load_topology(args.topology);
  if (hw_runner::inside_mpi_job())
    run_rank(args, topo);
  else
    launch_job(args, topo);
}

}  // namespace

void add_run_command(CLI::App& app) {
  auto* cmd = app.add_subcommand(
      "run", "Run a schedule on real hardware (MPI on CPUs, NCCL on GPUs), nccl-tests style");
  auto args = std::make_shared<RunArgs>();
  cmd->add_option("INPUT", args->input, "schedule JSON, MSCCL XML or DSL program")->required();
  cmd->add_option("--topo", args->topology, "built-in name or topology JSON file")->required();
  cmd->add_option("--backend", args->backend, "mpi | nccl")->capture_default_str();
  cmd->add_option("--collective", args->collective, "for a DSL program")->capture_default_str();
  cmd->add_option("--np", args->np, "ranks (default: the schedule's)");
  cmd->add_option("--hostfile", args->hostfile, "mpirun hostfile (default: all ranks here)");
  cmd->add_option("--sizes", args->sizes, "sizes, e.g. 1K:1M or 64K,1M")->capture_default_str();
  cmd->add_option("--iters", args->options.iters, "timed iterations per size")
      ->capture_default_str();
  cmd->add_option("--warmup", args->options.warmup_iters, "warm-up iterations per size")
      ->capture_default_str();
  cmd->add_option("--timeout", args->options.timeout_s,
                  "seconds a rank may wait in one execution before the job is aborted")
      ->capture_default_str();
  cmd->add_flag("--no-verify", args->no_verify,
                "skip the static verifier (the runner's data check still runs)");
  cmd->add_flag("--no-native", args->no_native, "do not measure the library's own collective");
  cmd->add_option("--native-algorithm", args->options.native_algorithm,
                  "Open MPI's algorithm for its own collective (coll/tuned: ring, bruck, "
                  "recursive-doubling, ...), to compare the schedule with the same algorithm");
  cmd->add_option("--db", args->db, "SQLite database for the results")->capture_default_str();
  cmd->add_flag("--no-store", args->no_store, "do not store the results");
  // Fault injection, for the runner's own tests.
  cmd->add_option("--inject-hang", args->options.hang_rank)->group("");
  cmd->add_option("--inject-crash", args->options.crash_rank)->group("");
  cmd->add_option("--results-json", args->results_json)->group("");
  cmd->callback([args] { with_program_diagnostics([&] { run(*args); }); });
}

}  // namespace optiflow::cli
