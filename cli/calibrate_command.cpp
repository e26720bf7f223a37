// `optiflow calibrate --backend mpi|nccl --np N -o T.json`: measures point-to-point latency and
// bandwidth between every pair of ranks (MPI between processes, or NCCL between GPUs), fits
// alpha/beta per pair, writes the calibrated topology, and reports the simulator's error on
// compiled schedules run for real with the same backend, with the uncalibrated topology
// (before) and the calibrated one (after).
#include <unistd.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <iostream>
#include <map>
#include <memory>
#include <nlohmann/json.hpp>
#include <optional>
#include <span>
#include <sstream>

#include "commands.hpp"
#include "format.hpp"
#include "hw_measure.hpp"
#include "inputs.hpp"
#include "measured_runs.hpp"
#include "optiflow/compiler/compiler.hpp"
#include "optiflow/db/store.hpp"
#include "optiflow/hw_runner/calibrate.hpp"
#include "optiflow/hw_runner/launch.hpp"
#include "optiflow/hw_runner/measure.hpp"
#include "optiflow/hw_runner/nccl_backend.hpp"
#include "optiflow/schedule/schedule_io.hpp"
#include "optiflow/sim/fidelity.hpp"
#include "optiflow/sim/host_model.hpp"
#include "optiflow/sim/simulator.hpp"
#include "optiflow/support/error.hpp"
#include "optiflow/support/sizes.hpp"
#include "optiflow/topology/generators.hpp"
#include "optiflow/topology/topology_io.hpp"

namespace optiflow::cli {
namespace {

namespace fs = std::filesystem;

struct CalibrateArgs {
  std::string backend = "mpi", output = "calibrated.json", sizes = "1K:1M";
  std::string check_sizes = "4K,64K,512K", samples_out, db = "optiflow.db";
  int np = 4, iters = 20;
  bool no_check = false, no_store = false;
  // --from-db: fit the machine to stored runs instead of measuring.
  std::vector<std::string> from_db;
  int ranks = 0;
  std::string bands = "4K,64K,512K,2M";
  MeasuredFilter filter;
  bool backend_given = false;
};

using PairKey = std::pair<std::int32_t, std::int32_t>;

std::vector<hw_runner::PairSample> read_samples(const std::string& path) {
  std::istringstream in(read_text_file(path));
  std::vector<hw_runner::PairSample> samples;
  hw_runner::PairSample s;
  while (in >> s.src >> s.dst >> s.bytes >> s.time_us) samples.push_back(s);
  return samples;
}

// Named after the backend ("calibrated-nccl4"): MPI between processes and NCCL between GPUs
// measure different links.
topology::Topology calibrated_topology(const std::string& backend, int ranks,
                                       const std::map<PairKey, hw_runner::LinkFit>& fits) {
  topology::Topology topo("calibrated-" + backend + std::to_string(ranks));
  for (int r = 0; r < ranks; ++r)
    topo.add_node(topology::Node{"g" + std::to_string(r), topology::NodeKind::gpu, r, 0, r});
  for (const auto& [pair, fit] : fits)
    topo.add_link(static_cast<topology::NodeId>(pair.first),
                  static_cast<topology::NodeId>(pair.second),
                  topology::LinkSpec{topology::LinkKind::other, fit.bw_GBps, fit.alpha_us});
  return topo;
}

// One size of one schedule, measured and simulated.
struct CheckRow {
  std::string program;
  std::uint64_t size_bytes = 0;
  double measured_us = 0, before_us = 0, base_us = 0, per_overhead_us = 0;
};

// What the simulator check found: the fitted overhead, the |errors|, and its table as JSON.
struct SimulatorCheck {
  double overhead_us = 0;
  double median_before = 0, worst_before = 0, median_after = 0, worst_after = 0;
  nlohmann::json rows = nlohmann::json::array();
};

// Least squares of measured = base + overhead * per_overhead over the rows (overhead >= 0):
// the simulator's time is linear in the per-step overhead.
double fit_overhead(const std::vector<CheckRow>& rows, const std::string& leave_out) {
  double num = 0, den = 0;
  for (const CheckRow& row : rows) {
    if (row.program == leave_out) continue;
    num += row.per_overhead_us * (row.measured_us - row.base_us);
    den += row.per_overhead_us * row.per_overhead_us;
  }
  return den > 0 ? std::max(0.0, num / den) : 0.0;
}

std::vector<double> sim_times(const topology::Topology& topo, const schedule::Schedule& s,
                              std::span<const std::uint64_t> sizes) {
  std::vector<double> times;
  for (const auto& result : sim::Simulator(topo, s).sweep(sizes)) times.push_back(result.time_us);
  return times;
}

// Each program compiled for the calibrated topology and run for real; the alpha-beta simulator
// predicts it with the uncalibrated fullmesh<N> (before) and with the calibrated links plus a
// per-step overhead fitted on the other programs' runs (after: leave one schedule out, so no
// schedule is predicted with a figure fitted on itself); its overhead is the one fitted on all.
SimulatorCheck check_simulator(const CalibrateArgs& args, topology::Topology after,
                               const fs::path& work) {
  const topology::Topology before = topology::make_fullmesh(args.np);
  std::vector<std::string> programs{"ring over all", "direct over all"};
  if ((args.np & (args.np - 1)) == 0) programs.push_back("rd over all");
  const auto sizes = support::parse_sizes(args.check_sizes, "check_sizes");
  std::vector<CheckRow> rows;
  std::map<std::string, schedule::Schedule> schedules;
  after.set_op_overhead_us(0);
  topology::Topology unit_overhead = after;
  unit_overhead.set_op_overhead_us(1);
  for (const std::string& program : programs) {
    const schedule::Schedule compiled =
        compiler::compile_program(program, program.substr(0, program.find(' ')), after, {})
            .schedule;
    std::cerr << "calibrate: running '" << program << "'...\n";
    HwRun run;
    run.backend = args.backend;
    run.topology = (work / "topology.json").string();
    run.sizes = sizes;
    run.iters = args.iters;
    run.work = work;
    if (!args.no_store) run.db = args.db;  // so that `calibrate --from-db` can use them later
    std::vector<double> measured;
    try {
      measured = run_on_hardware(compiled, run);
    } catch (const std::runtime_error& e) {
      throw std::runtime_error("running '" + program + "' failed: " + e.what());
    }
    const schedule::Schedule plain = schedule::without_routes(compiled);
    const auto before_us = sim_times(before, plain, sizes);
    const auto base_us = sim_times(after, plain, sizes);
    const auto unit_us = sim_times(unit_overhead, plain, sizes);
    for (std::size_t i = 0; i < sizes.size(); ++i)
      rows.push_back(
          {program, sizes[i], measured[i], before_us[i], base_us[i], unit_us[i] - base_us[i]});
  }
  std::cout << strprintf(
      "\nsimulator error on %zu schedules, alpha-beta model (before: %s; "
      "after: the calibrated links and a per-step overhead fitted on the "
      "other schedules)\n",
      programs.size(), before.name().c_str());
  std::cout << strprintf("%-20s %8s %12s %12s %8s %12s %8s %10s\n", "schedule", "size",
                         "measured_us", "before_us", "error", "after_us", "error", "overhead");
  std::vector<double> errors_before, errors_after;
  SimulatorCheck check;
  for (const CheckRow& row : rows) {
    const double overhead = fit_overhead(rows, row.program);
    const double after_us = row.base_us + overhead * row.per_overhead_us;
    const double error_before = (row.before_us - row.measured_us) / row.measured_us;
    const double error_after = (after_us - row.measured_us) / row.measured_us;
    errors_before.push_back(std::abs(error_before));
    errors_after.push_back(std::abs(error_after));
    std::cout << strprintf("%-20s %8s %12.2f %12.2f %+7.1f%% %12.2f %+7.1f%% %10.2f\n",
                           row.program.c_str(), support::format_size(row.size_bytes).c_str(),
                           row.measured_us, row.before_us, 100 * error_before, after_us,
                           100 * error_after, overhead);
    check.rows.push_back({{"schedule", row.program},
                          {"size_bytes", row.size_bytes},
                          {"measured_us", row.measured_us},
                          {"before_us", row.before_us},
                          {"after_us", after_us},
                          {"overhead_us", overhead}});
  }
  check.median_before = sim::median(errors_before);
  check.worst_before = *std::ranges::max_element(errors_before);
  check.median_after = sim::median(errors_after);
  check.worst_after = *std::ranges::max_element(errors_after);
  std::cout << strprintf(
      "|error| before: median %.1f%%, worst %.1f%%; after: median %.1f%%, "
      "worst %.1f%%\n",
      100 * check.median_before, 100 * check.worst_before, 100 * check.median_after,
      100 * check.worst_after);
  check.overhead_us = fit_overhead(rows, "");
  return check;
}

// The calibration in the database, for `optiflow history calibrations`.
void store_calibration(const CalibrateArgs& args, const topology::Topology& topo,
                       const std::optional<SimulatorCheck>& check) {
  db::CalibrationRecord record;
  record.backend = args.backend;
  record.ranks = args.np;
  record.topology_name = topo.name();
  record.topology_json = topology::write_topology_json(topo);
  if (check) {
    record.checked = true;
    record.median_error_before = check->median_before;
    record.worst_error_before = check->worst_before;
    record.median_error_after = check->median_after;
    record.worst_error_after = check->worst_after;
    record.check_json = check->rows.dump();
  }
  record.options_json = nlohmann::json{
      {"sizes", args.sizes},
      {"check_sizes", args.no_check ? "" : args.check_sizes},
      {"iters", args.iters},
      {"output",
       args.output}}.dump();
  const db::Id id = db::Store::open(args.db).record_calibration(record);
  std::cout << "stored as calibration " << id << " in " << args.db
            << " (optiflow history calibrations)\n";
}

[[noreturn]] void finish(int status) {
  std::fflush(nullptr);
  std::exit(status);
}

void check_backend(const std::string& backend) {
  const support::SourceLocation where{"command line", 0, 0, "--backend"};
  if (backend != "mpi" && backend != "nccl")
    throw support::InputError(where, "unknown backend '" + backend + "' (mpi or nccl)");
  if (backend == "nccl" && !hw_runner::nccl_backend_built())
    throw support::InputError(where, "this optiflow was built without CUDA and NCCL");
}

// One rank of the calibration job: rank 0 writes the samples. A rank without a GPU ends with
// kNoDevice, as `optiflow run`'s ranks do, so that the launcher reports a skip.
void calibrate_rank(const CalibrateArgs& args, const hw_runner::CalibrationOptions& options) {
  std::vector<hw_runner::PairSample> samples;
  if (args.backend == "nccl") {
    try {
      samples = hw_runner::run_nccl_calibration(options);
    } catch (const hw_runner::NoDeviceError&) {
      finish(hw_runner::kNoDevice);
    }
  } else {
    samples = hw_runner::run_mpi_calibration(options);
  }
  if (args.samples_out.empty() || samples.empty()) return;
  std::string text;
  for (const auto& s : samples)
    text += strprintf("%d %d %llu %.6f\n", s.src, s.dst, static_cast<unsigned long long>(s.bytes),
                      s.time_us);
  write_text_file(args.samples_out, text);
}

void print_fit(const sim::FitReport& fit, std::size_t schedules) {
  const sim::HostModel& m = fit.model;
  std::cout << strprintf(
      "fitted on %zu points of %zu schedules (%d iterations): median |error| %.1f%%, worst "
      "%.1f%%\n",
      fit.residuals.size(), schedules, fit.iterations, 100 * fit.median_error,
      100 * fit.worst_error);
  std::cout << strprintf(
      "launch %.2f us, per step %.2f us (a rank's steps in turn); per rank: send %.2f GB/s, "
      "receive %.2f GB/s; host memory system %.2f GB/s shared\n",
      m.launch_us, m.step_us, m.send_GBps, m.recv_GBps, m.memory_GBps);
  std::cout << strprintf("%-22s %10s %10s\n", "messages", "alpha_us", "bw_factor");
  std::uint64_t from = 0;
  for (const topology::MessageBand& band : m.bands) {
    const std::string range =
        band.max_bytes ? support::format_size(from) + ".." + support::format_size(band.max_bytes)
                       : "> " + support::format_size(from);
    std::cout << strprintf("%-22s %10.2f %10.3f\n", range.c_str(), band.alpha_us, band.bw_factor);
    from = band.max_bytes;
  }
  std::map<std::string, std::vector<double>> by_schedule;
  for (const sim::FitResidual& r : fit.residuals)
    by_schedule[r.schedule].push_back(r.simulated_us / r.measured_us - 1);
  std::cout << strprintf("%-40s %7s %14s %12s\n", "schedule", "points", "median error",
                         "worst |err|");
  for (auto& [name, errors] : by_schedule) {
    double worst = 0;
    for (double e : errors) worst = std::max(worst, std::abs(e));
    std::cout << strprintf("%-40s %7zu %+13.1f%% %11.1f%%\n", name.c_str(), errors.size(),
                           100 * sim::median(errors), 100 * worst);
  }
}

// `calibrate --from-db`: the host model fitted to every stored measurement, written as a
// topology of --ranks ranks.
void calibrate_from_db(const CalibrateArgs& args) {
  if (args.ranks < 2)
    throw support::InputError(support::SourceLocation{"command line", 0, 0, "--ranks"},
                              "the fitted topology needs at least 2 ranks");
  MeasuredFilter filter = args.filter;
  if (args.backend_given) filter.backend = args.backend;
  const auto measured = read_measured(args.from_db, filter);
  sim::FitOptions options;
  options.band_edges = support::parse_sizes(args.bands, "bands");
  options.progress = [](int iteration, double cost) {
    std::cerr << strprintf("calibrate: iteration %d, robust cost %.4f\n", iteration, cost);
  };
  std::size_t points = 0;
  for (const auto& m : measured) points += m.times_us.size();
  std::cerr << "calibrate: fitting the machine to " << points << " measurements of "
            << measured.size() << " schedules...\n";
  const sim::FitReport fit = sim::fit_host_model(measured, options);
  print_fit(fit, measured.size());
  const std::string name = "fitted-" +
                           (filter.backend.empty() ? std::string("hw") : filter.backend) +
                           std::to_string(args.ranks);
  write_text_file(args.output, topology::write_topology_json(fit.model.topology(args.ranks, name)));
  std::cout << "wrote " << args.output << " (" << name << ", " << args.ranks
            << " ranks on one host)\n";
}

void calibrate(const CalibrateArgs& args) {
  if (!args.from_db.empty()) {
    calibrate_from_db(args);
    return;
  }
  check_backend(args.backend);
  hw_runner::CalibrationOptions options;
  options.sizes = support::parse_sizes(args.sizes);
  options.iters = args.iters;
  if (hw_runner::inside_mpi_job()) {
    calibrate_rank(args, options);
    return;
  }
  if (args.np < 2)
    throw support::InputError(support::SourceLocation{"command line", 0, 0, "--np"},
                              "calibration needs at least 2 ranks");
  const fs::path work =
      fs::temp_directory_path() / ("optiflow-calibrate-" + std::to_string(getpid()));
  fs::create_directories(work);
  const std::string samples_path = (work / "samples.txt").string();
  std::cerr << "calibrate: ping-pong between " << args.np * (args.np - 1) / 2 << " pairs at "
            << options.sizes.size() << " sizes...\n";
  hw_runner::LaunchOptions launch;
  launch.np = args.np;
  launch.job_timeout_s = 600;
  const int status = hw_runner::launch(
      launch, {hw_runner::own_command_line().front(), "calibrate", "--backend", args.backend,
               "--np", std::to_string(args.np), "--sizes", args.sizes, "--iters",
               std::to_string(args.iters), "--samples-out", samples_path});
  if (status == hw_runner::kNoDevice) {
    fs::remove_all(work);
    std::cerr << "optiflow calibrate: skipped: no GPU for the NCCL backend\n";
    finish(hw_runner::kNoDevice);
  }
  if (status != 0) throw std::runtime_error("the calibration job failed");
  const auto samples = read_samples(samples_path);
  std::map<PairKey, std::vector<hw_runner::PairSample>> by_pair;
  for (const auto& s : samples) by_pair[{s.src, s.dst}].push_back(s);
  const hw_runner::LinkFit pooled = hw_runner::fit_alpha_beta(samples);
  std::map<PairKey, hw_runner::LinkFit> fits;
  std::cout << strprintf("point-to-point fit t = alpha + bytes / bw over %zu sizes %s..%s\n",
                         options.sizes.size(), support::format_size(options.sizes.front()).c_str(),
                         support::format_size(options.sizes.back()).c_str());
  std::cout << strprintf("%-10s %10s %10s %10s\n", "pair", "alpha_us", "bw_GB/s", "rms_us");
  std::cout << strprintf("%-10s %10.2f %10.3f %10.2f\n", "all", pooled.alpha_us, pooled.bw_GBps,
                         pooled.rms_error_us);
  for (const auto& [pair, pair_samples] : by_pair) {
    const hw_runner::LinkFit fit = hw_runner::fit_alpha_beta(pair_samples);
    fits[pair] = fit;
    if (pair.first > pair.second) continue;
    const bool differs = std::abs(fit.bw_GBps - pooled.bw_GBps) > 0.25 * pooled.bw_GBps ||
                         std::abs(fit.alpha_us - pooled.alpha_us) > 0.25 * pooled.alpha_us;
    std::cout << strprintf(
        "%-10s %10.2f %10.3f %10.2f%s\n",
        (std::to_string(pair.first) + "<->" + std::to_string(pair.second)).c_str(), fit.alpha_us,
        fit.bw_GBps, fit.rms_error_us, differs ? "  (differs from the pooled fit by > 25%)" : "");
  }
  // Through its JSON, so that the topology is exactly what `--topo calibrated.json` loads.
  const std::string topology_path = (work / "topology.json").string();
  write_text_file(topology_path,
                  topology::write_topology_json(calibrated_topology(args.backend, args.np, fits)));
  topology::Topology topo = topology::load_topology(topology_path);
  std::optional<SimulatorCheck> check;
  if (!args.no_check) {
    check = check_simulator(args, topo, work);
    topo.set_op_overhead_us(check->overhead_us);
    std::cout << strprintf("per-step overhead fitted on all runs: %.2f us\n", check->overhead_us);
  }
  write_text_file(args.output, topology::write_topology_json(topo));
  std::cout << "wrote " << args.output << " (" << topo.name() << ", " << topo.link_count()
            << " links)\n";
  if (!args.no_store) store_calibration(args, topo, check);
  fs::remove_all(work);
}

}  // namespace

void add_calibrate_command(CLI::App& app) {
  auto* cmd = app.add_subcommand(
      "calibrate",
      "Measure point-to-point alpha/beta, write a calibrated topology, and report "
      "the simulator's error before and after");
  auto args = std::make_shared<CalibrateArgs>();
  cmd->add_option("--backend", args->backend, "mpi (processes) or nccl (one GPU per rank)")
      ->capture_default_str();
  cmd->add_option("--np", args->np, "ranks")->capture_default_str();
  cmd->add_option("-o,--output", args->output, "calibrated topology JSON")->capture_default_str();
  cmd->add_option("--sizes", args->sizes, "ping-pong sizes")->capture_default_str();
  cmd->add_option("--iters", args->iters, "iterations per measurement")->capture_default_str();
  cmd->add_option("--check-sizes", args->check_sizes, "sizes of the simulator check")
      ->capture_default_str();
  cmd->add_flag("--no-check", args->no_check, "skip the simulator check");
  cmd->add_option("--db", args->db, "SQLite database the calibration is stored in")
      ->capture_default_str();
  cmd->add_flag("--no-store", args->no_store, "do not store the calibration");
  cmd->add_option("--samples-out", args->samples_out)->group("");
  cmd->add_option("--from-db", args->from_db,
                  "fit the machine to the hardware results stored in this database instead of "
                  "measuring (repeatable)");
  cmd->add_option("--ranks", args->ranks, "with --from-db: ranks of the topology to write");
  cmd->add_option("--bands", args->bands, "with --from-db: upper edges of the message-size bands")
      ->capture_default_str();
  cmd->add_option("--only", args->filter.only, "with --from-db: only schedules matching (glob)");
  cmd->add_option("--exclude", args->filter.exclude,
                  "with --from-db: leave out schedules matching (glob)");
  cmd->callback([args, cmd] {
    args->backend_given = cmd->count("--backend") > 0;
    calibrate(*args);
  });
}

}  // namespace optiflow::cli
