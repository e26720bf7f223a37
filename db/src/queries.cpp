// Everything that reads the store. Reads of more than one statement run in one read
// transaction, so they see one committed state even while another process writes.
#include "store_impl.hpp"

namespace optiflow::db {
namespace {

// Runs `body` in one read snapshot (BEGIN ... COMMIT; in WAL mode it never blocks a writer).
template <class Body>
auto snapshot(Store::Impl& impl, Body&& body) -> decltype(body()) {
  impl.exec("BEGIN");
  try {
    if constexpr (std::is_void_v<decltype(body())>) {
      body();
      impl.exec("COMMIT");
    } else {
      auto result = body();
      impl.exec("COMMIT");
      return result;
    }
  } catch (...) {
    if (sqlite3_get_autocommit(impl.db) == 0)
      sqlite3_exec(impl.db, "ROLLBACK", nullptr, nullptr, nullptr);
    throw;
  }
}

// The filter as SQL conditions over runs r, topologies t and programs p, with fixed parameter
// numbers (?1 topology, ?2 collective, ?3 since, ?4 run, ?5 origin) so each combination of
// filters is its own cached statement and can use the indexes.
std::string filter_clause(const HistoryFilter& filter, bool origin_of_candidate_program) {
  std::string clause = "1";
  if (!filter.topology.empty()) clause += " AND t.name = ?1";
  if (!filter.collective.empty()) clause += " AND r.collective = ?2";
  if (!filter.since.empty()) clause += " AND r.started_at >= ?3";
  if (filter.run_id != 0) clause += " AND r.id = ?4";
  if (!filter.origin.empty()) {
    clause +=
        origin_of_candidate_program
            ? " AND p.origin = ?5"
            : " AND EXISTS (SELECT 1 FROM candidates oc JOIN programs op ON op.id = oc.program_id "
              "WHERE oc.run_id = r.id AND op.origin = ?5)";
  }
  return clause;
}

void bind_filter(Query& q, const HistoryFilter& filter) {
  if (!filter.topology.empty()) q->bind(1, filter.topology);
  if (!filter.collective.empty()) q->bind(2, filter.collective);
  if (!filter.since.empty()) q->bind(3, filter.since);
  if (filter.run_id != 0) q->bind(4, filter.run_id);
  if (!filter.origin.empty()) q->bind(5, filter.origin);
}

support::SizeResult perf_at(const Statement& s, int first) {
  return support::SizeResult{s.uint64(first), s.real(first + 1), s.real(first + 2),
                             s.real(first + 3), s.real(first + 4)};
}

constexpr const char* kRunColumns =
    "SELECT r.id, r.topology_id, t.name, r.collective, r.proposer, r.seed, r.budget, r.status, "
    "r.started_at, "
    "COALESCE(r.finished_at, ''), r.host, r.git_revision, r.options_json FROM runs r "
    "JOIN topologies t ON t.id = r.topology_id ";

RunInfo run_at(const Statement& s) {
  RunInfo run;
  run.id = s.int64(0);
  run.topology_id = s.int64(1);
  run.topology_name = s.text(2);
  run.collective = s.text(3);
  run.proposer = s.text(4);
  run.seed = s.uint64(5);
  run.budget = s.int64(6);
  run.status = s.text(7);
  run.started_at = s.text(8);
  run.finished_at = s.text(9);
  run.host = s.text(10);
  run.git_revision = s.text(11);
  run.options_json = s.text(12);
  return run;
}

void read_sizes(Store::Impl& impl, RunInfo& run) {
  Query q = impl.query("SELECT size_bytes FROM run_sizes WHERE run_id = ?1 ORDER BY size_bytes");
  q->bind_all(run.id);
  while (q->step()) run.sizes.push_back(q->uint64(0));
}

}  // namespace

int Store::schema_version() const {
  return user_version(impl_->db);
}

std::optional<RunInfo> Store::run(Id id) const {
  return snapshot(*impl_, [&]() -> std::optional<RunInfo> {
    std::optional<RunInfo> run;
    {
      Query q = impl_->query(std::string(kRunColumns) + "WHERE r.id = ?1");
      q->bind_all(id);
      if (q->step()) run = run_at(*q);
    }
    if (run) read_sizes(*impl_, *run);
    return run;
  });
}

std::vector<RunInfo> Store::runs(const HistoryFilter& filter) const {
  return snapshot(*impl_, [&] {
    std::vector<RunInfo> runs;
    {
      Query q = impl_->query(std::string(kRunColumns) + "WHERE " + filter_clause(filter, false) +
                             " ORDER BY r.started_at, r.id");
      bind_filter(q, filter);
      while (q->step()) runs.push_back(run_at(*q));
    }
    for (RunInfo& run : runs) read_sizes(*impl_, run);
    return runs;
  });
}

RunStats Store::run_stats(Id run_id) const {
  Query q = impl_->query(
      "SELECT COUNT(*), COUNT(schedule_id), COALESCE(MAX(iteration), -1) FROM candidates WHERE "
      "run_id = ?1");
  q->bind_all(run_id);
  q->step();
  return RunStats{q->int64(0), q->int64(1), q->int64(2)};
}

std::vector<StoredCandidate> Store::candidates(Id run_id) const {
  return snapshot(*impl_, [&] {
    std::vector<StoredCandidate> stored;
    {
      Query q = impl_->query(
          "SELECT c.seq, c.iteration, c.island, c.program_id, p.source, c.schedule_id IS NOT NULL, "
          "CASE WHEN c.schedule_id IS NULL THEN comp.diagnostics ELSE '' END, COALESCE(s.hash, '') "
          "FROM candidates c JOIN programs p ON p.id = c.program_id "
          "JOIN compilations comp ON comp.id = c.compilation_id LEFT JOIN schedules s ON s.id = "
          "c.schedule_id "
          "WHERE c.run_id = ?1 ORDER BY c.seq");
      q->bind_all(run_id);
      while (q->step()) {
        StoredCandidate c;
        c.seq = q->int64(0);
        c.iteration = q->int64(1);
        c.island = q->int64(2);
        c.program_id = q->int64(3);
        c.program_source = q->text(4);
        c.compiled = q->int64(5) != 0;
        c.diagnostics = q->text(6);
        c.schedule_hash = q->text(7);
        stored.push_back(std::move(c));
      }
    }
    Query q = impl_->query(
        "SELECT c.seq, m.size_bytes, m.time_us, m.algbw_GBps, m.busbw_GBps, m.bound_us "
        "FROM candidates c JOIN runs r ON r.id = c.run_id JOIN run_sizes rs ON rs.run_id = "
        "c.run_id "
        "JOIN simulations m ON m.schedule_id = c.schedule_id AND m.topology_id = r.topology_id "
        "AND m.model = c.model AND m.size_bytes = rs.size_bytes "
        "WHERE c.run_id = ?1 ORDER BY c.seq, m.size_bytes");
    q->bind_all(run_id);
    std::size_t at = 0;  // both lists are in seq order, and one snapshot: every sim's seq is there
    while (q->step()) {
      const std::int64_t seq = q->int64(0);
      while (at < stored.size() && stored[at].seq < seq) ++at;
      if (at < stored.size()) stored[at].sims.push_back(perf_at(*q, 1));
    }
    return stored;
  });
}

std::optional<CompilationInfo> Store::cached_compilation(const std::string& program_source,
                                                         Id topology_id,
                                                         const std::string& collective) const {
  Query q = impl_->query(
      "SELECT comp.program_id, comp.compiled, comp.diagnostics, comp.compile_ms, COALESCE(s.hash, "
      "''), "
      "COALESCE(s.chunks, 0), COALESCE(s.steps, 0), p.source FROM programs p "
      "JOIN compilations comp ON comp.program_id = p.id LEFT JOIN schedules s ON s.id = "
      "comp.schedule_id "
      "WHERE p.hash = ?1 AND comp.topology_id = ?2 AND comp.collective = ?3");
  q->bind_all(content_hash(program_source), topology_id, collective);
  if (!q->step() || q->text(7) != program_source) return std::nullopt;
  return CompilationInfo{q->int64(0), q->int64(1) != 0, q->text(2), q->real(3),
                         q->text(4),  q->int64(5),      q->int64(6)};
}

std::optional<std::vector<support::SizeResult>> Store::cached_sims(const std::string& schedule_hash,
                                                                   Id topology_id,
                                                                   const std::string& model) const {
  Query q = impl_->query(
      "SELECT m.size_bytes, m.time_us, m.algbw_GBps, m.busbw_GBps, m.bound_us FROM schedules s "
      "JOIN simulations m ON m.schedule_id = s.id WHERE s.hash = ?1 AND m.topology_id = ?2 AND "
      "m.model = ?3 "
      "ORDER BY m.size_bytes");
  q->bind_all(schedule_hash, topology_id, model);
  std::vector<support::SizeResult> rows;
  while (q->step()) rows.push_back(perf_at(*q, 0));
  if (rows.empty()) return std::nullopt;
  return rows;
}

namespace {

// Candidates joined with their run, topology, program, schedule and simulations at the run's
// sizes: the rows behind best() and results().
constexpr const char* kCandidateSims =
    "FROM candidates c JOIN runs r ON r.id = c.run_id JOIN topologies t ON t.id = r.topology_id "
    "JOIN programs p ON p.id = c.program_id JOIN schedules s ON s.id = c.schedule_id "
    "JOIN run_sizes rs ON rs.run_id = c.run_id "
    "JOIN simulations m ON m.schedule_id = c.schedule_id AND m.topology_id = r.topology_id "
    "AND m.size_bytes = rs.size_bytes ";

}  // namespace

std::vector<BestEntry> Store::best(const HistoryFilter& filter, const std::string& model) const {
  Query q = impl_->query(
      std::string("WITH ranked AS (SELECT m.size_bytes, c.run_id, c.program_id, s.hash, m.time_us, "
                  "m.algbw_GBps, "
                  "m.busbw_GBps, m.bound_us, ROW_NUMBER() OVER (PARTITION BY m.size_bytes "
                  "ORDER BY m.time_us, c.recorded_at, c.run_id, c.seq) AS place ") +
      kCandidateSims + "WHERE m.model = ?6 AND " + filter_clause(filter, true) +
      ") SELECT size_bytes, run_id, program_id, hash, size_bytes, time_us, algbw_GBps, busbw_GBps, "
      "bound_us "
      "FROM ranked WHERE place = 1 ORDER BY size_bytes");
  bind_filter(q, filter);
  q->bind(6, model);
  std::vector<BestEntry> best;
  while (q->step())
    best.push_back(BestEntry{q->uint64(0), q->int64(1), q->int64(2), q->text(3), perf_at(*q, 4)});
  return best;
}

std::vector<ResultRow> Store::results(const HistoryFilter& filter) const {
  Query q = impl_->query(std::string("SELECT c.run_id, c.seq, c.iteration, c.program_id, "
                                     "coalesce(nullif(c.origin, ''), p.origin), "
                                     "t.name, r.collective, m.model, "
                                     "s.hash, c.recorded_at, m.size_bytes, m.time_us, "
                                     "m.algbw_GBps, m.busbw_GBps, m.bound_us ") +
                         kCandidateSims + "WHERE " + filter_clause(filter, true) +
                         " ORDER BY c.run_id, c.seq, m.model, m.size_bytes");
  bind_filter(q, filter);
  std::vector<ResultRow> rows;
  while (q->step()) {
    ResultRow row;
    row.run_id = q->int64(0);
    row.seq = q->int64(1);
    row.iteration = q->int64(2);
    row.program_id = q->int64(3);
    row.origin = q->text(4);
    row.topology = q->text(5);
    row.collective = q->text(6);
    row.model = q->text(7);
    row.schedule_hash = q->text(8);
    row.recorded_at = q->text(9);
    row.perf = perf_at(*q, 10);
    rows.push_back(std::move(row));
  }
  return rows;
}

std::optional<ProgramInfo> Store::program(Id id) const {
  return snapshot(*impl_, [&]() -> std::optional<ProgramInfo> {
    ProgramInfo info;
    {
      Query q =
          impl_->query("SELECT id, hash, source, origin, created_at FROM programs WHERE id = ?1");
      q->bind_all(id);
      if (!q->step()) return std::nullopt;
      info = ProgramInfo{q->int64(0), q->text(1), q->text(2), q->text(3), q->text(4), {}};
    }
    Query q =
        impl_->query("SELECT parent_id FROM program_parents WHERE program_id = ?1 ORDER BY rowid");
    q->bind_all(id);
    while (q->step()) info.parents.push_back(q->int64(0));
    return info;
  });
}

std::optional<std::string> Store::schedule_json(const std::string& schedule_hash) const {
  Query q = impl_->query("SELECT json FROM schedules WHERE hash = ?1");
  q->bind_all(schedule_hash);
  if (!q->step() || q->is_null(0)) return std::nullopt;
  return q->text(0);
}

std::vector<Store::HwMeasurement> Store::hw_measurements() const {
  Query q = impl_->query(
      "SELECT s.hash, s.json, t.name, h.backend, h.host_info, h.size_bytes, h.time_us, "
      "h.algbw_GBps, h.busbw_GBps, h.bound_us FROM hw_results h "
      "JOIN schedules s ON s.id = h.schedule_id JOIN topologies t ON t.id = h.topology_id "
      "WHERE s.json IS NOT NULL ORDER BY s.id, h.backend, h.size_bytes, h.id");
  std::vector<HwMeasurement> rows;
  while (q->step())
    rows.push_back({q->text(0), q->text(1), q->text(2), q->text(3), q->text(4), perf_at(*q, 5)});
  return rows;
}

std::vector<Store::ProgramResult> Store::program_results(Id program_id) const {
  Query q = impl_->query(
      "SELECT t.name, comp.collective, m.model, s.hash, '', '', m.size_bytes, m.time_us, "
      "m.algbw_GBps, "
      "m.busbw_GBps, m.bound_us FROM compilations comp JOIN schedules s ON s.id = comp.schedule_id "
      "JOIN topologies t ON t.id = comp.topology_id "
      "JOIN simulations m ON m.schedule_id = comp.schedule_id AND m.topology_id = comp.topology_id "
      "WHERE comp.program_id = ?1 "
      "UNION ALL "
      "SELECT t.name, comp.collective, '', s.hash, h.backend, h.host_info, h.size_bytes, "
      "h.time_us, "
      "h.algbw_GBps, h.busbw_GBps, h.bound_us FROM compilations comp JOIN schedules s ON s.id = "
      "comp.schedule_id "
      "JOIN topologies t ON t.id = comp.topology_id "
      "JOIN hw_results h ON h.schedule_id = comp.schedule_id AND h.topology_id = comp.topology_id "
      "WHERE comp.program_id = ?1 "
      "ORDER BY 1, 2, 5, 3, 7");
  q->bind_all(program_id);
  std::vector<ProgramResult> results;
  while (q->step())
    results.push_back(ProgramResult{q->text(0), q->text(1), q->text(2), q->text(3), q->text(4),
                                    q->text(5), perf_at(*q, 6)});
  return results;
}

namespace {

constexpr const char* kModelCallColumns =
    "SELECT id, run_id, model, purpose, prompt_tokens, completion_tokens, latency_ms, cost, "
    "request_hash, request, response, text_stored, cached, finish_reason, error, called_at, "
    "(SELECT count(*) FROM candidates c WHERE c.model_call_id = model_calls.id) "
    "FROM model_calls ";

ModelCall model_call_at(const Statement& row) {
  return ModelCall{row.int64(0), row.int64(1),       row.text(2),        row.text(3),  row.int64(4),
                   row.int64(5), row.real(6),        row.real(7),        row.text(8),  row.text(9),
                   row.text(10), row.int64(11) != 0, row.int64(12) != 0, row.text(13), row.text(14),
                   row.text(15), row.int64(16)};
}

}  // namespace

std::vector<ModelCall> Store::model_calls(Id run_id) const {
  Query q = impl_->query(std::string(kModelCallColumns) + "WHERE run_id = ?1 ORDER BY id");
  q->bind_all(run_id);
  std::vector<ModelCall> calls;
  while (q->step()) calls.push_back(model_call_at(*q));
  return calls;
}

std::optional<ModelCall> Store::cached_model_call(const std::string& request_hash) const {
  Query q = impl_->query(std::string(kModelCallColumns) +
                         "WHERE request_hash = ?1 AND text_stored = 1 AND error = '' "
                         "ORDER BY id LIMIT 1");
  q->bind_all(request_hash);
  if (!q->step()) return std::nullopt;
  return model_call_at(*q);
}

std::optional<Id> Store::run_opened_by(const std::string& request_hash, Id except_run) const {
  Query q = impl_->query(
      "SELECT run_id FROM model_calls m WHERE request_hash = ?1 AND run_id <> ?2 AND "
      "id = (SELECT min(id) FROM model_calls WHERE run_id = m.run_id) ORDER BY run_id DESC LIMIT "
      "1");
  q->bind_all(request_hash, except_run);
  if (!q->step()) return std::nullopt;
  return q->int64(0);
}

std::vector<ModelCall> Store::model_calls_of_program(Id program_id) const {
  Query q = impl_->query(std::string(kModelCallColumns) +
                         "WHERE id IN (SELECT model_call_id FROM candidates WHERE program_id = ?1) "
                         "ORDER BY id");
  q->bind_all(program_id);
  std::vector<ModelCall> calls;
  while (q->step()) calls.push_back(model_call_at(*q));
  return calls;
}

std::vector<ComparisonRecord> Store::comparisons(const HistoryFilter& filter) const {
  return snapshot(*impl_, [&] {
    std::vector<ComparisonRecord> found;
    {
      std::string sql =
          "SELECT r.id, r.topology_id, t.name, r.collective, r.model, r.created_at, "
          "r.options_json FROM comparisons r JOIN topologies t ON t.id = r.topology_id WHERE 1";
      if (!filter.topology.empty()) sql += " AND t.name = ?1";
      if (!filter.collective.empty()) sql += " AND r.collective = ?2";
      if (!filter.since.empty()) sql += " AND r.created_at >= ?3";
      Query q = impl_->query(sql + " ORDER BY r.created_at DESC, r.id DESC");
      if (!filter.topology.empty()) q->bind(1, filter.topology);
      if (!filter.collective.empty()) q->bind(2, filter.collective);
      if (!filter.since.empty()) q->bind(3, filter.since);
      while (q->step())
        found.push_back(ComparisonRecord{q->int64(0),
                                         q->int64(1),
                                         q->text(2),
                                         q->text(3),
                                         q->text(4),
                                         q->text(5),
                                         q->text(6),
                                         {}});
    }
    for (ComparisonRecord& record : found) {
      {
        Query q = impl_->query(
            "SELECT c.name, COALESCE(s.hash, ''), c.synthesis_s, c.status FROM "
            "comparison_contenders c LEFT JOIN schedules s ON s.id = c.schedule_id "
            "WHERE c.comparison_id = ?1 ORDER BY c.position");
        q->bind_all(record.id);
        while (q->step()) {
          ComparisonContender c;
          c.name = q->text(0);
          c.schedule_hash = q->text(1);
          c.synthesis_s = q->real(2);
          c.status = q->text(3);
          record.contenders.push_back(std::move(c));
        }
      }
      Query q = impl_->query(
          "SELECT position, size_bytes, time_us, algbw_GBps, busbw_GBps, bound_us, choice "
          "FROM comparison_results WHERE comparison_id = ?1 ORDER BY position, size_bytes");
      q->bind_all(record.id);
      while (q->step()) {
        ComparisonContender& c = record.contenders.at(static_cast<std::size_t>(q->int64(0)));
        c.results.push_back(perf_at(*q, 1));
        c.choices.push_back(q->text(6));
      }
    }
    return found;
  });
}

ModelCallTotals Store::model_call_totals(Id run_id) const {
  Query q = impl_->query(
      "SELECT count(*), total(cached), total(error <> ''), "
      "total(CASE WHEN cached = 0 THEN prompt_tokens END), "
      "total(CASE WHEN cached = 0 THEN completion_tokens END), "
      "total(CASE WHEN cached = 0 THEN cost END), total(latency_ms) "
      "FROM model_calls WHERE run_id = ?1");
  q->bind_all(run_id);
  q->step();
  return ModelCallTotals{q->int64(0),
                         static_cast<std::int64_t>(q->real(1)),
                         static_cast<std::int64_t>(q->real(2)),
                         static_cast<std::int64_t>(q->real(3)),
                         static_cast<std::int64_t>(q->real(4)),
                         q->real(5),
                         q->real(6)};
}

std::vector<CalibrationRecord> Store::calibrations() const {
  return snapshot(*impl_, [&] {
    std::vector<CalibrationRecord> found;
    Query q = impl_->query(
        "SELECT c.id, c.created_at, c.host, c.backend, c.ranks, c.topology_id, t.name, t.json, "
        "c.checked, c.median_error_before, c.worst_error_before, c.median_error_after, "
        "c.worst_error_after, c.check_json, c.options_json FROM calibrations c "
        "JOIN topologies t ON t.id = c.topology_id ORDER BY c.created_at DESC, c.id DESC");
    while (q->step()) {
      CalibrationRecord c;
      c.id = q->int64(0);
      c.created_at = q->text(1);
      c.host = q->text(2);
      c.backend = q->text(3);
      c.ranks = q->int64(4);
      c.topology_id = q->int64(5);
      c.topology_name = q->text(6);
      c.topology_json = q->text(7);
      c.checked = q->int64(8) != 0;
      c.median_error_before = q->real(9);
      c.worst_error_before = q->real(10);
      c.median_error_after = q->real(11);
      c.worst_error_after = q->real(12);
      c.check_json = q->text(13);
      c.options_json = q->text(14);
      found.push_back(std::move(c));
    }
    return found;
  });
}

}  // namespace optiflow::db
