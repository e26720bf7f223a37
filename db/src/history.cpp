// History views composed from the store's queries, and the CSV/JSON exports.
#include "optiflow/db/history.hpp"

#include <algorithm>
#include <array>
#include <charconv>
#include <deque>
#include <map>
#include <nlohmann/json.hpp>
#include <set>

namespace optiflow::db {
namespace {

constexpr std::array<const char*, 15> kResultColumns{
    "run_id",   "seq",        "iteration",  "program_id",    "origin",
    "topology", "collective", "model",      "schedule_hash", "size_bytes",
    "time_us",  "algbw_GBps", "busbw_GBps", "bound_us",      "recorded_at"};

std::string number(double value) {
  std::array<char, 32> text{};
  const auto [end, error] = std::to_chars(text.data(), text.data() + text.size(), value);
  return error == std::errc() ? std::string(text.data(), end) : std::string("nan");
}

std::string csv_field(const std::string& field) {
  if (field.find_first_of(",\"\r\n") == std::string::npos) return field;
  std::string quoted = "\"";
  for (char c : field) {
    if (c == '"') quoted += '"';
    quoted += c;
  }
  return quoted + "\"";
}

std::array<std::string, kResultColumns.size()> csv_fields(const ResultRow& row) {
  return {
      std::to_string(row.run_id),          std::to_string(row.seq),   std::to_string(row.iteration),
      std::to_string(row.program_id),      csv_field(row.origin),     csv_field(row.topology),
      csv_field(row.collective),           csv_field(row.model),      csv_field(row.schedule_hash),
      std::to_string(row.perf.size_bytes), number(row.perf.time_us),  number(row.perf.algbw_GBps),
      number(row.perf.busbw_GBps),         number(row.perf.bound_us), csv_field(row.recorded_at)};
}

// Best per size (lowest time, then lowest seq) and the running best after each iteration,
// from one run's result rows of one model.
void summarise(const std::vector<ResultRow>& rows, RunDetail& detail) {
  std::map<std::uint64_t, std::size_t> size_index;
  for (std::size_t i = 0; i < detail.run.sizes.size(); ++i) size_index[detail.run.sizes[i]] = i;

  std::vector<const ResultRow*> ordered;
  for (const ResultRow& row : rows)
    if (size_index.contains(row.perf.size_bytes)) ordered.push_back(&row);
  std::stable_sort(ordered.begin(), ordered.end(), [](const ResultRow* a, const ResultRow* b) {
    return a->iteration != b->iteration ? a->iteration < b->iteration : a->seq < b->seq;
  });

  std::vector<const ResultRow*> best(detail.run.sizes.size(), nullptr);
  std::set<std::int64_t> seqs;
  for (std::size_t i = 0; i < ordered.size(); ++i) {
    const ResultRow& row = *ordered[i];
    const ResultRow*& held = best[size_index.at(row.perf.size_bytes)];
    if (held == nullptr || row.perf.time_us < held->perf.time_us ||
        (row.perf.time_us == held->perf.time_us && row.seq < held->seq))
      held = &row;
    seqs.insert(row.seq);
    if (i + 1 < ordered.size() && ordered[i + 1]->iteration == row.iteration) continue;
    ProgressRow progress{row.iteration, static_cast<std::int64_t>(seqs.size()), {}};
    for (const ResultRow* b : best)
      progress.best_time_us.push_back(b != nullptr ? std::optional<double>(b->perf.time_us)
                                                   : std::nullopt);
    detail.progress.push_back(std::move(progress));
  }
  for (const ResultRow* b : best)
    if (b != nullptr)
      detail.best.push_back(
          BestEntry{b->perf.size_bytes, b->run_id, b->program_id, b->schedule_hash, b->perf});
}

}  // namespace

std::vector<RunSummary> list_runs(const Store& store, const HistoryFilter& filter) {
  std::vector<RunSummary> summaries;
  for (RunInfo& run : store.runs(filter)) {
    const RunStats stats = store.run_stats(run.id);
    const ModelCallTotals calls = store.model_call_totals(run.id);
    summaries.push_back(RunSummary{std::move(run), stats, calls});
  }
  return summaries;
}

std::optional<RunDetail> run_detail(const Store& store, Id run_id, const std::string& model) {
  std::optional<RunInfo> run = store.run(run_id);
  if (!run) return std::nullopt;
  RunDetail detail;
  detail.run = std::move(*run);
  detail.stats = store.run_stats(run_id);
  detail.calls = store.model_call_totals(run_id);
  detail.model = model;
  HistoryFilter filter;
  filter.run_id = run_id;
  std::vector<ResultRow> rows = store.results(filter);
  std::erase_if(rows, [&](const ResultRow& row) { return row.model != model; });
  summarise(rows, detail);
  return detail;
}

std::vector<BestEntry> best_across_runs(const Store& store, const HistoryFilter& filter,
                                        const std::string& model) {
  return store.best(filter, model);
}

std::optional<ProgramLineage> program_lineage(const Store& store, Id program_id) {
  std::optional<ProgramInfo> program = store.program(program_id);
  if (!program) return std::nullopt;
  ProgramLineage lineage;
  lineage.program = std::move(*program);
  lineage.results = store.program_results(program_id);
  lineage.proposed_by = store.model_calls_of_program(program_id);

  std::set<Id> seen{program_id};
  std::deque<std::pair<Id, int>> pending;
  for (Id parent : lineage.program.parents) pending.emplace_back(parent, 1);
  while (!pending.empty()) {
    const auto [id, depth] = pending.front();
    pending.pop_front();
    if (!seen.insert(id).second) continue;
    std::optional<ProgramInfo> ancestor = store.program(id);
    if (!ancestor) continue;
    for (Id parent : ancestor->parents) pending.emplace_back(parent, depth + 1);
    lineage.ancestors.push_back(Ancestor{std::move(*ancestor), depth});
  }
  return lineage;
}

std::string results_csv(const std::vector<ResultRow>& rows) {
  std::string csv;
  for (std::size_t i = 0; i < kResultColumns.size(); ++i)
    csv += std::string(i > 0 ? "," : "") + kResultColumns[i];
  csv += '\n';
  for (const ResultRow& row : rows) {
    const auto fields = csv_fields(row);
    for (std::size_t i = 0; i < fields.size(); ++i) csv += (i > 0 ? "," : "") + fields[i];
    csv += '\n';
  }
  return csv;
}

std::string results_json(const std::vector<ResultRow>& rows) {
  nlohmann::ordered_json array = nlohmann::ordered_json::array();
  for (const ResultRow& row : rows) {
    array.push_back(nlohmann::ordered_json{{"run_id", row.run_id},
                                           {"seq", row.seq},
                                           {"iteration", row.iteration},
                                           {"program_id", row.program_id},
                                           {"origin", row.origin},
                                           {"topology", row.topology},
                                           {"collective", row.collective},
                                           {"model", row.model},
                                           {"schedule_hash", row.schedule_hash},
                                           {"size_bytes", row.perf.size_bytes},
                                           {"time_us", row.perf.time_us},
                                           {"algbw_GBps", row.perf.algbw_GBps},
                                           {"busbw_GBps", row.perf.busbw_GBps},
                                           {"bound_us", row.perf.bound_us},
                                           {"recorded_at", row.recorded_at}});
  }
  return array.dump(2, ' ', false, nlohmann::json::error_handler_t::replace) + "\n";
}

}  // namespace optiflow::db
