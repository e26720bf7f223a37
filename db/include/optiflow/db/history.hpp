// The queries behind `optiflow history` (docs/database.md#history-queries): plain functions
// over a Store that return values, and the CSV and JSON exports, so that the CLI and the GUI
// only print.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "optiflow/db/store.hpp"

namespace optiflow::db {

/// A run and how far it got.
struct RunSummary {
  RunInfo run;
  RunStats stats;
  ModelCallTotals calls;
};
/// The runs matching the filter (origin: runs with a candidate of that origin), by start time.
std::vector<RunSummary> list_runs(const Store& store, const HistoryFilter& filter = {});

/// The best time per size once every candidate up to an iteration has been evaluated.
struct ProgressRow {
  std::int64_t iteration = 0;
  std::int64_t candidates = 0;  ///< candidates with results up to and including this iteration
  std::vector<std::optional<double>> best_time_us;  ///< per run.sizes; nullopt: no result yet
};

struct RunDetail {
  RunInfo run;
  RunStats stats;
  ModelCallTotals calls;
  std::string model;
  std::vector<BestEntry> best;        ///< per size with a result, ascending (ties: lowest seq)
  std::vector<ProgressRow> progress;  ///< one per iteration that has results, ascending
};
/// A run's best program per size and its progress over iterations, for one simulation model;
/// nullopt when there is no such run.
std::optional<RunDetail> run_detail(const Store& store, Id run_id,
                                    const std::string& model = "alpha-beta");

/// The best program per size across all runs matching the filter (Store::best).
std::vector<BestEntry> best_across_runs(const Store& store, const HistoryFilter& filter,
                                        const std::string& model = "alpha-beta");

struct Ancestor {
  ProgramInfo program;
  int depth = 1;  ///< 1: a parent, 2: a grandparent, ...
};
struct ProgramLineage {
  ProgramInfo program;
  std::vector<Ancestor> ancestors;  ///< breadth-first, each program once, at its nearest depth
  std::vector<Store::ProgramResult> results;
  std::vector<ModelCall> proposed_by;  ///< the model calls whose replies held it
};
/// A program, all its ancestors, and every result of its schedules; nullopt when there is no
/// such program.
std::optional<ProgramLineage> program_lineage(const Store& store, Id program_id);

/// Results as CSV: a header line, then one line per row, fields quoted where RFC 4180 needs it,
/// numbers in their shortest exact form. Columns: run_id, seq, iteration, program_id, origin,
/// topology, collective, model, schedule_hash, size_bytes, time_us, algbw_GBps, busbw_GBps,
/// bound_us, recorded_at.
std::string results_csv(const std::vector<ResultRow>& rows);
/// Results as a JSON array of objects with the CSV's columns as keys, in that order.
std::string results_json(const std::vector<ResultRow>& rows);

}  // namespace optiflow::db
