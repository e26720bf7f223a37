// `optiflow history runs | run RUN | calls RUN | comparisons | calibrations | best | program ID |
// export`: queries over the database.
#include <filesystem>
#include <iostream>
#include <memory>
#include <sstream>

#include "commands.hpp"
#include "format.hpp"
#include "inputs.hpp"
#include "optiflow/db/history.hpp"
#include "optiflow/db/store.hpp"
#include "optiflow/support/error.hpp"
#include "optiflow/support/sizes.hpp"

namespace optiflow::cli {
namespace {

struct HistoryArgs {
  std::string db = "optiflow.db";
  db::HistoryFilter filter;
  std::string size, format = "csv", output, model = "alpha-beta";
  std::int64_t id = 0;
};

db::Store open_store(const HistoryArgs& args) {
  if (!std::filesystem::exists(args.db))
    throw support::InputError(support::SourceLocation{args.db, 0, 0, {}},
                              "no such database (run optiflow explore first)");
  return db::Store::open(args.db);
}

void print_best(const std::vector<db::BestEntry>& best, const std::string& size_filter,
                const db::Store& store) {
  std::cout << strprintf("%8s %6s %8s %12s %11s %8s  %s\n", "size", "run", "program", "time_us",
                         "busbw GB/s", "x bound", "program text");
  const std::uint64_t only = size_filter.empty() ? 0 : support::parse_size(size_filter, "size");
  for (const auto& b : best) {
    if (only && b.size_bytes != only) continue;
    const auto program = store.program(b.program_id);
    std::cout << strprintf(
        "%8s %6lld %8lld %12.3f %11.2f %8.3f  %s\n", support::format_size(b.size_bytes).c_str(),
        static_cast<long long>(b.run_id), static_cast<long long>(b.program_id), b.perf.time_us,
        b.perf.busbw_GBps, b.perf.bound_us > 0 ? b.perf.time_us / b.perf.bound_us : 0.0,
        program ? one_line(program->source).substr(0, 60).c_str() : "?");
  }
}

std::string calls_cell(const db::ModelCallTotals& t) {
  if (t.calls == 0) return "-";
  return strprintf("%lld/%lld/%.2f", static_cast<long long>(t.calls),
                   static_cast<long long>(t.prompt_tokens + t.completion_tokens), t.cost);
}

void runs(const HistoryArgs& args) {
  const db::Store store = open_store(args);
  std::cout << strprintf("%5s %-20s %-16s %-13s %-8s %6s %9s %11s %-18s  %s\n", "run", "started",
                         "topology", "collective", "proposer", "seed", "evaluated", "status",
                         "calls/tokens/cost", "sizes");
  for (const auto& r : db::list_runs(store, args.filter)) {
    const auto& s = r.run.sizes;
    std::cout << strprintf(
        "%5lld %-20s %-16s %-13s %-8s %6llu %4lld/%-4lld %11s %-18s  %s:%s\n",
        static_cast<long long>(r.run.id), r.run.started_at.substr(0, 19).c_str(),
        r.run.topology_name.c_str(), r.run.collective.c_str(), r.run.proposer.c_str(),
        static_cast<unsigned long long>(r.run.seed), static_cast<long long>(r.stats.candidates),
        static_cast<long long>(r.run.budget), r.run.status.c_str(), calls_cell(r.calls).c_str(),
        s.empty() ? "" : support::format_size(s.front()).c_str(),
        s.empty() ? "" : support::format_size(s.back()).c_str());
  }
}

void print_call_totals(const db::ModelCallTotals& t) {
  std::cout << model_call_totals_line(t) << strprintf(", %.1f s waiting\n", t.latency_ms / 1000);
}

void calls(const HistoryArgs& args) {
  const db::Store store = open_store(args);
  if (!store.run(args.id))
    throw support::InputError(support::SourceLocation{args.db, 0, 0, "RUN"},
                              "no run " + std::to_string(args.id));
  print_call_totals(store.model_call_totals(args.id));
  std::cout << strprintf("\n%6s %-8s %-24s %6s %8s %8s %9s %-7s %10s  %s\n", "call", "purpose",
                         "model", "cached", "prompt", "reply", "ms", "finish", "candidates",
                         "error");
  for (const db::ModelCall& c : store.model_calls(args.id))
    std::cout << strprintf("%6lld %-8s %-24s %6s %8lld %8lld %9.1f %-7s %10lld  %s\n",
                           static_cast<long long>(c.id), c.purpose.c_str(), c.model.c_str(),
                           c.cached ? "yes" : "no", static_cast<long long>(c.prompt_tokens),
                           static_cast<long long>(c.completion_tokens), c.latency_ms,
                           c.finish_reason.c_str(), static_cast<long long>(c.candidates),
                           c.error.substr(0, 100).c_str());
}

void run(const HistoryArgs& args) {
  const db::Store store = open_store(args);
  const auto detail = db::run_detail(store, args.id, args.model);
  if (!detail)
    throw support::InputError(support::SourceLocation{args.db, 0, 0, "RUN"},
                              "no run " + std::to_string(args.id));
  const auto& r = detail->run;
  std::cout << strprintf(
      "run %lld: %s on %s, proposer %s, seed %llu, %lld of %lld candidates (%lld compiled), %s\n",
      static_cast<long long>(r.id), r.collective.c_str(), r.topology_name.c_str(),
      r.proposer.c_str(), static_cast<unsigned long long>(r.seed),
      static_cast<long long>(detail->stats.candidates), static_cast<long long>(r.budget),
      static_cast<long long>(detail->stats.compiled), r.status.c_str());
  std::cout << strprintf("started %s, finished %s, host %s, revision %s\n\n", r.started_at.c_str(),
                         r.finished_at.empty() ? "-" : r.finished_at.c_str(), r.host.c_str(),
                         r.git_revision.c_str());
  if (detail->calls.calls > 0) {
    print_call_totals(detail->calls);
    std::cout << "\n";
  }
  print_best(detail->best, args.size, store);
  std::cout
      << "\nprogress (best time_us after each iteration, smallest / middle / largest size):\n";
  for (const auto& p : detail->progress) {
    std::string row =
        strprintf("  iteration %3lld (%4lld candidates):", static_cast<long long>(p.iteration),
                  static_cast<long long>(p.candidates));
    for (std::size_t i : {std::size_t{0}, p.best_time_us.size() / 2, p.best_time_us.size() - 1})
      if (i < p.best_time_us.size())
        row += p.best_time_us[i] ? strprintf(" %12.3f", *p.best_time_us[i]) : "            -";
    std::cout << row << "\n";
  }
}

void best(const HistoryArgs& args) {
  const db::Store store = open_store(args);
  print_best(db::best_across_runs(store, args.filter, args.model), args.size, store);
}

void program(const HistoryArgs& args) {
  const db::Store store = open_store(args);
  const auto lineage = db::program_lineage(store, args.id);
  if (!lineage)
    throw support::InputError(support::SourceLocation{args.db, 0, 0, "ID"},
                              "no program " + std::to_string(args.id));
  std::cout << strprintf("program %lld (%s, %s, hash %s):\n%s\n",
                         static_cast<long long>(lineage->program.id),
                         lineage->program.origin.c_str(), lineage->program.created_at.c_str(),
                         lineage->program.hash.c_str(), lineage->program.source.c_str());
  for (const auto& c : lineage->proposed_by)
    std::cout << strprintf("proposed by model call %lld (run %lld, %s, %s)\n",
                           static_cast<long long>(c.id), static_cast<long long>(c.run_id),
                           c.model.c_str(), c.purpose.c_str());
  std::cout << "lineage:\n";
  if (lineage->ancestors.empty())
    std::cout << "  (no parents: a template or an imported program)\n";
  for (const auto& a : lineage->ancestors)
    std::cout << strprintf("  %*s#%lld %s\n", 2 * (a.depth - 1), "",
                           static_cast<long long>(a.program.id),
                           one_line(a.program.source).substr(0, 70).c_str());
  std::cout << "\nresults:\n";
  for (const auto& r : lineage->results)
    std::cout << strprintf(
        "  %-16s %-13s %-10s %8s %12.3f us %10.2f GB/s busbw\n", r.topology.c_str(),
        r.collective.c_str(), (r.backend.empty() ? r.model : r.backend).c_str(),
        support::format_size(r.perf.size_bytes).c_str(), r.perf.time_us, r.perf.busbw_GBps);
}

void comparisons(const HistoryArgs& args) {
  const db::Store store = open_store(args);
  for (const db::ComparisonRecord& c : store.comparisons(args.filter)) {
    std::cout << strprintf("comparison %lld: %s on %s, %s model, %s\n",
                           static_cast<long long>(c.id), c.collective.c_str(),
                           c.topology_name.c_str(), c.model.c_str(),
                           c.created_at.substr(0, 19).c_str());
    for (const db::ComparisonContender& k : c.contenders) {
      std::string line = strprintf("  %-24s %10.3f s ", k.name.c_str(), k.synthesis_s);
      for (const support::SizeResult& r : k.results)
        line += strprintf(" %s %.2f GB/s x%.3f;", support::format_size(r.size_bytes).c_str(),
                          r.busbw_GBps, r.bound_us > 0 ? r.time_us / r.bound_us : 0.0);
      std::cout << line << "\n";
    }
  }
}

void calibrations(const HistoryArgs& args) {
  const db::Store store = open_store(args);
  std::cout << strprintf("%5s %-20s %-16s %-7s %5s %-16s %21s %21s\n", "id", "time", "host",
                         "backend", "ranks", "topology", "|error| before (med/max)",
                         "after (med/max)");
  for (const db::CalibrationRecord& c : store.calibrations()) {
    const auto errors = [&](double median, double worst) {
      return c.checked ? strprintf("%.1f%% / %.1f%%", 100 * median, 100 * worst)
                       : std::string("not checked");
    };
    std::cout << strprintf("%5lld %-20s %-16s %-7s %5lld %-16s %21s %21s\n",
                           static_cast<long long>(c.id), c.created_at.substr(0, 19).c_str(),
                           c.host.c_str(), c.backend.c_str(), static_cast<long long>(c.ranks),
                           c.topology_name.c_str(),
                           errors(c.median_error_before, c.worst_error_before).c_str(),
                           errors(c.median_error_after, c.worst_error_after).c_str());
  }
}

void export_results(const HistoryArgs& args) {
  const db::Store store = open_store(args);
  const auto rows = store.results(args.filter);
  if (args.format != "csv" && args.format != "json")
    throw support::InputError(support::SourceLocation{"command line", 0, 0, "--format"},
                              "use csv or json");
  const std::string text = args.format == "csv" ? db::results_csv(rows) : db::results_json(rows);
  if (args.output.empty())
    std::cout << text;
  else
    write_text_file(args.output, text);
}

void add_filters(CLI::App& cmd, HistoryArgs& args) {
  cmd.add_option("--topo", args.filter.topology, "topology name");
  cmd.add_option("--collective", args.filter.collective, "allgather | reducescatter | allreduce");
  cmd.add_option("--origin", args.filter.origin, "offline | llm | baseline | import | user");
  cmd.add_option("--since", args.filter.since, "runs started at or after this date (YYYY-MM-DD)");
}

}  // namespace

std::string one_line(const std::string& program) {
  std::string joined, line;
  std::istringstream lines(program);
  while (std::getline(lines, line)) {
    const auto first = line.find_first_not_of(' ');
    if (first == std::string::npos) continue;
    line = line.substr(first);
    const bool same_statement = joined.empty() || joined.back() == '{' || line.front() == '}' ||
                                (joined.back() == '}' && line.starts_with("weight"));
    if (!joined.empty()) joined += same_statement ? " " : "; ";
    joined += line;
  }
  return joined;
}

void add_history_command(CLI::App& app) {
  auto* history = app.add_subcommand("history", "Query the results database");
  history->require_subcommand(1);
  auto args = std::make_shared<HistoryArgs>();
  history->add_option("--db", args->db, "SQLite database")->capture_default_str();
  history->add_option("--model", args->model, "alpha-beta | flow")->capture_default_str();

  auto* list = history->add_subcommand("runs", "List explorations");
  add_filters(*list, *args);
  list->callback([args] { runs(*args); });

  auto* one =
      history->add_subcommand("run", "One run: best program per size, progress per iteration");
  one->add_option("RUN", args->id, "run id")->required();
  one->add_option("--size", args->size, "only this size");
  one->callback([args] { run(*args); });

  auto* model_calls =
      history->add_subcommand("calls", "A run's model calls: tokens, cost, latency, errors");
  model_calls->add_option("RUN", args->id, "run id")->required();
  model_calls->callback([args] { calls(*args); });

  auto* studies = history->add_subcommand(
      "comparisons", "Stored comparison studies (optiflow compare): busbw and x bound per size");
  add_filters(*studies, *args);
  studies->callback([args] { comparisons(*args); });

  auto* calibrated = history->add_subcommand(
      "calibrations", "Stored calibrations (optiflow calibrate): the simulator's error per run");
  calibrated->callback([args] { calibrations(*args); });

  auto* top = history->add_subcommand("best", "Best program per size across runs");
  add_filters(*top, *args);
  top->add_option("--size", args->size, "only this size");
  top->callback([args] { best(*args); });

  auto* prog = history->add_subcommand("program", "A program, its lineage and its results");
  prog->add_option("ID", args->id, "program id")->required();
  prog->callback([args] { program(*args); });

  auto* exp = history->add_subcommand("export", "Every simulated result as CSV or JSON");
  add_filters(*exp, *args);
  exp->add_option("--run", args->filter.run_id, "one run");
  exp->add_option("--format", args->format, "csv | json")->capture_default_str();
  exp->add_option("-o,--output", args->output, "file (default: standard output)");
  exp->callback([args] { export_results(*args); });
}

}  // namespace optiflow::cli
