// Opening the store and everything that writes to it: each public write is one transaction.
#include <unistd.h>

#include <array>
#include <chrono>
#include <cstdio>
#include <ctime>

#include "store_impl.hpp"

namespace optiflow::db {

std::string utc_now() {
  const auto now = std::chrono::system_clock::now();
  const std::time_t seconds = std::chrono::system_clock::to_time_t(now);
  const auto millis =
      std::chrono::duration_cast<std::chrono::milliseconds>(now.time_since_epoch()).count() % 1000;
  std::tm utc{};
  gmtime_r(&seconds, &utc);
  std::array<char, 80> text{};  // room for any int, so the compiler sees no truncation
  std::snprintf(text.data(), text.size(), "%04d-%02d-%02dT%02d:%02d:%02d.%03dZ", utc.tm_year + 1900,
                utc.tm_mon + 1, utc.tm_mday, utc.tm_hour, utc.tm_min, utc.tm_sec,
                static_cast<int>(millis));
  return text.data();
}

Store::Impl::~Impl() {
  statements.clear();  // finalized before the connection closes
  sqlite3_close_v2(db);
}

Query Store::Impl::query(std::string_view sql) {
  auto found = statements.find(std::string(sql));
  if (found == statements.end())
    found = statements.emplace(std::string(sql), std::make_unique<Statement>(db, sql)).first;
  return Query(*found->second);
}

void Store::Impl::exec(const char* sql) const {
  char* error = nullptr;
  const int rc = sqlite3_exec(db, sql, nullptr, nullptr, &error);
  if (rc == SQLITE_OK) return;
  const std::string message = error != nullptr ? error : sqlite3_errstr(rc);
  sqlite3_free(error);
  throw DbError(sql, rc & 0xff, message);
}

void Store::Impl::rollback() const {
  if (sqlite3_get_autocommit(db) == 0) sqlite3_exec(db, "ROLLBACK", nullptr, nullptr, nullptr);
}

namespace {

constexpr int kBusyTimeoutMs = 5000;

std::string host_name() {
  std::array<char, 256> name{};
  if (gethostname(name.data(), name.size() - 1) != 0) return "unknown";
  return name.data();
}

[[noreturn]] void misuse(const char* call, const std::string& message) {
  throw DbError(call, SQLITE_MISUSE, message);
}

[[noreturn]] void collision(const char* what, const std::string& hash) {
  throw DbError(std::string("content hash of ") + what, SQLITE_ERROR,
                "hash collision: " + hash + " already stores a different " + what);
}

// The topology's id, stored once per content hash of its JSON.
Id put_topology_row(Store::Impl& impl, const std::string& name, const std::string& topology_json) {
  const std::string hash = content_hash(topology_json);
  {
    Query q = impl.query("SELECT id, json FROM topologies WHERE hash = ?1");
    q->bind_all(hash);
    if (q->step()) {
      if (q->text(1) != topology_json) collision("topology", hash);
      return q->int64(0);
    }
  }
  Query q = impl.query(
      "INSERT INTO topologies(hash, name, json, created_at) VALUES (?1, ?2, ?3, ?4) RETURNING id");
  q->bind_all(hash, name, topology_json, utc_now());
  q->step();
  return q->int64(0);
}

Id topology_of_run(Store::Impl& impl, Id run_id) {
  Query q = impl.query("SELECT topology_id FROM runs WHERE id = ?1");
  q->bind_all(run_id);
  if (!q->step()) throw DbError("run " + std::to_string(run_id), SQLITE_NOTFOUND, "no such run");
  return q->int64(0);
}

Id put_program(Store::Impl& impl, const std::string& source, const std::string& origin,
               const std::vector<Id>& parents) {
  const std::string hash = content_hash(source);
  Id program_id = 0;
  {
    Query q = impl.query("SELECT id, source FROM programs WHERE hash = ?1");
    q->bind_all(hash);
    if (q->step()) {
      if (q->text(1) != source) collision("program", hash);
      program_id = q->int64(0);
    }
  }
  if (program_id == 0) {
    Query q = impl.query(
        "INSERT INTO programs(hash, source, origin, created_at) VALUES (?1, ?2, ?3, ?4) RETURNING "
        "id");
    q->bind_all(hash, source, origin, utc_now());
    q->step();
    program_id = q->int64(0);
  }
  for (Id parent : parents) {
    if (parent == program_id) continue;  // a program re-proposed from itself has no new parent
    Query q = impl.query(
        "INSERT INTO program_parents(program_id, parent_id) VALUES (?1, ?2) ON CONFLICT DO "
        "NOTHING");
    q->bind_all(program_id, parent);
    q->run();
  }
  return program_id;
}

// The schedule's id, stored once per hash; an empty json stores (or keeps) NULL.
Id put_schedule_row(Store::Impl& impl, const std::string& hash, const std::string& json,
                    std::int64_t chunks, std::int64_t steps) {
  {
    Query q = impl.query("SELECT id, json FROM schedules WHERE hash = ?1");
    q->bind_all(hash);
    if (q->step()) {
      const Id id = q->int64(0);
      if (json.empty()) return id;
      if (!q->is_null(1)) {
        if (q->text(1) != json) collision("schedule", hash);
        return id;
      }
      Query fill = impl.query("UPDATE schedules SET json = ?2 WHERE id = ?1");
      fill->bind_all(id, json);
      fill->run();
      return id;
    }
  }
  Query q = impl.query(
      "INSERT INTO schedules(hash, json, chunks, steps, created_at) VALUES (?1, ?2, ?3, ?4, ?5) "
      "RETURNING id");
  q->bind_all(hash, json.empty() ? std::optional<std::string>() : std::optional<std::string>(json),
              chunks, steps, utc_now());
  q->step();
  return q->int64(0);
}

// The schedule hash a record or put_schedule means: given, or computed from the JSON.
std::string schedule_hash_of(const char* call, const std::string& hash, const std::string& json) {
  if (json.empty()) return hash;
  const std::string computed = content_hash(json);
  if (!hash.empty() && hash != computed)
    misuse(call, "schedule_hash " + hash + " is not the content hash of schedule_json (" +
                     computed + ")");
  return computed;
}

void check_record(const CandidateRecord& record) {
  constexpr const char* call = "record_candidate";
  if (record.compiled && record.schedule_hash.empty() && record.schedule_json.empty())
    misuse(call, "candidate " + std::to_string(record.seq) + " compiled but has no schedule_hash");
  if (!record.compiled && !record.sims.empty())
    misuse(call, "candidate " + std::to_string(record.seq) +
                     " did not compile but has simulation results");
  if (!record.compiled && (!record.schedule_hash.empty() || !record.schedule_json.empty()))
    misuse(call, "candidate " + std::to_string(record.seq) + " did not compile but has a schedule");
}

void insert_sims(Store::Impl& impl, Id schedule_id, Id topology_id, const std::string& model,
                 const std::vector<support::SizeResult>& sims) {
  const std::string now = utc_now();
  for (const support::SizeResult& row : sims) {
    Query q = impl.query(
        "INSERT INTO simulations(schedule_id, topology_id, model, size_bytes, time_us, algbw_GBps, "
        "busbw_GBps, "
        "bound_us, simulated_at) VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, ?9) ON CONFLICT DO "
        "NOTHING");
    q->bind_all(schedule_id, topology_id, model, row.size_bytes, row.time_us, row.algbw_GBps,
                row.busbw_GBps, row.bound_us, now);
    q->run();
  }
}

}  // namespace

Store::Store(std::unique_ptr<Impl> impl) : impl_(std::move(impl)) {}
Store::~Store() = default;
Store::Store(Store&&) noexcept = default;
Store& Store::operator=(Store&&) noexcept = default;

Store Store::open(const std::string& path) {
  sqlite3* db = nullptr;
  const int rc =
      sqlite3_open_v2(path.c_str(), &db, SQLITE_OPEN_READWRITE | SQLITE_OPEN_CREATE, nullptr);
  auto impl = std::make_unique<Impl>(db);  // closes the handle whatever happens next
  if (rc != SQLITE_OK) throw_sqlite(db, "sqlite3_open_v2(" + path + ")", rc);
  sqlite3_busy_timeout(db, kBusyTimeoutMs);
  impl->exec("PRAGMA foreign_keys = ON");
  {
    Statement wal(db, "PRAGMA journal_mode = WAL");
    wal.step();
    const std::string mode = wal.text(0);
    if (mode != "wal" && mode != "memory")
      throw DbError("PRAGMA journal_mode = WAL (" + path + ")", SQLITE_ERROR,
                    "the database stays in journal mode '" + mode + "'");
  }
  impl->exec("PRAGMA synchronous = NORMAL");
  migrate(*impl);
  return Store(std::move(impl));
}

Store Store::open_read_only(const std::string& path) {
  // immutable=1 where the file's directory is read-only too: SQLite cannot create the WAL
  // index next to it, and nobody can be writing the file.
  for (const char* mode : {"mode=ro", "immutable=1"}) {
    sqlite3* db = nullptr;
    const std::string uri = "file:" + path + "?" + mode;
    const int rc =
        sqlite3_open_v2(uri.c_str(), &db, SQLITE_OPEN_READONLY | SQLITE_OPEN_URI, nullptr);
    auto impl = std::make_unique<Impl>(db);
    if (rc != SQLITE_OK) throw_sqlite(db, "sqlite3_open_v2(" + path + ")", rc);
    sqlite3_busy_timeout(db, kBusyTimeoutMs);
    Store store(std::move(impl));
    int version = 0;
    try {
      version = store.schema_version();
    } catch (const DbError&) {
      if (std::string_view(mode) == "mode=ro") continue;
      throw;
    }
    if (version > kSchemaVersion || version == 0)
      throw DbError("open_read_only(" + path + ")", SQLITE_ERROR,
                    version == 0
                        ? "not an optiflow database (schema version 0)"
                        : "its schema version " + std::to_string(version) +
                              " is newer than this optiflow's " + std::to_string(kSchemaVersion));
    return store;
  }
  throw DbError("open_read_only(" + path + ")", SQLITE_CANTOPEN, "cannot be opened");
}

Id Store::put_topology(const std::string& name, const std::string& topology_json) {
  return impl_->transaction("put_topology",
                            [&] { return put_topology_row(*impl_, name, topology_json); });
}

Id Store::begin_run(RunInfo info) {
  if (info.started_at.empty()) info.started_at = utc_now();
  if (info.host.empty()) info.host = host_name();
  return impl_->transaction("begin_run", [&] {
    Id run_id = 0;
    {
      Query q = impl_->query(
          "INSERT INTO runs(topology_id, collective, proposer, seed, budget, status, started_at, "
          "host, "
          "git_revision, options_json) VALUES (?1, ?2, ?3, ?4, ?5, 'running', ?6, ?7, ?8, ?9) "
          "RETURNING id");
      q->bind_all(info.topology_id, info.collective, info.proposer, info.seed, info.budget,
                  info.started_at, info.host, info.git_revision, info.options_json);
      q->step();
      run_id = q->int64(0);
    }
    for (std::uint64_t size : info.sizes) {
      Query q = impl_->query(
          "INSERT INTO run_sizes(run_id, size_bytes) VALUES (?1, ?2) ON CONFLICT DO NOTHING");
      q->bind_all(run_id, size);
      q->run();
    }
    return run_id;
  });
}

void Store::set_run_status(Id id, const std::string& status) {
  impl_->transaction("set_run_status", [&] {
    Query q = impl_->query(
        "UPDATE runs SET status = ?2, finished_at = CASE WHEN ?2 = 'running' THEN NULL ELSE ?3 END "
        "WHERE id = ?1");
    q->bind_all(id, status, utc_now());
    q->run();
    if (sqlite3_changes(impl_->db) == 0)
      throw DbError("run " + std::to_string(id), SQLITE_NOTFOUND, "no such run");
  });
}

Id Store::record_candidate(const CandidateRecord& record) {
  check_record(record);
  Id stored_program = 0;
  const std::string schedule_hash =
      record.compiled
          ? schedule_hash_of("record_candidate", record.schedule_hash, record.schedule_json)
          : "";
  impl_->transaction("record_candidate", [&] {
    Impl& impl = *impl_;
    const Id topology_id = topology_of_run(impl, record.run_id);
    const Id program_id =
        put_program(impl, record.program_source, record.origin, record.parent_program_ids);
    stored_program = program_id;
    std::optional<Id> schedule_id;
    if (record.compiled) {
      schedule_id = put_schedule_row(impl, schedule_hash, record.schedule_json,
                                     record.schedule_chunks, record.schedule_steps);
      insert_sims(impl, *schedule_id, topology_id, record.model, record.sims);
    }
    Id compilation_id = 0;
    {
      Query q = impl.query(
          "INSERT INTO compilations(program_id, topology_id, collective, compiled, diagnostics, "
          "compile_ms, "
          "schedule_id, compiled_at) VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8) "
          "ON CONFLICT (program_id, topology_id, collective) DO UPDATE SET compiled = "
          "excluded.compiled, "
          "diagnostics = excluded.diagnostics, compile_ms = excluded.compile_ms, "
          "schedule_id = excluded.schedule_id, compiled_at = excluded.compiled_at RETURNING id");
      q->bind_all(program_id, topology_id, record.collective, record.compiled,
                  record.compiled ? std::string() : record.diagnostics, record.compile_ms,
                  schedule_id, utc_now());
      q->step();
      compilation_id = q->int64(0);
    }
    Query q = impl.query(
        "INSERT INTO candidates(run_id, seq, iteration, island, program_id, compilation_id, "
        "schedule_id, model, recorded_at, origin, model_call_id) "
        "VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, ?9, ?10, ?11)");
    std::optional<Id> call;
    if (record.model_call_id > 0) call = record.model_call_id;
    q->bind_all(record.run_id, record.seq, record.iteration, record.island, program_id,
                compilation_id, schedule_id, record.model, utc_now(), record.origin, call);
    q->run();
  });
  return stored_program;
}

Id Store::put_schedule(const std::string& schedule_hash, const std::string& schedule_json,
                       std::int64_t chunks, std::int64_t steps) {
  const std::string hash = schedule_hash_of("put_schedule", schedule_hash, schedule_json);
  if (hash.empty()) misuse("put_schedule", "neither a schedule hash nor its JSON given");
  return impl_->transaction(
      "put_schedule", [&] { return put_schedule_row(*impl_, hash, schedule_json, chunks, steps); });
}

void Store::record_hw_result(const std::string& schedule_hash, Id topology_id,
                             const std::string& backend, const support::SizeResult& perf,
                             const std::string& host_info) {
  impl_->transaction("record_hw_result", [&] {
    Id schedule_id = 0;
    {
      Query q = impl_->query("SELECT id FROM schedules WHERE hash = ?1");
      q->bind_all(schedule_hash);
      if (!q->step())
        throw DbError("schedule " + schedule_hash, SQLITE_NOTFOUND,
                      "no such schedule (store it first with put_schedule)");
      schedule_id = q->int64(0);
    }
    Query q = impl_->query(
        "INSERT INTO hw_results(schedule_id, topology_id, backend, size_bytes, time_us, "
        "algbw_GBps, busbw_GBps, "
        "bound_us, host_info, measured_at) VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, ?9, ?10)");
    q->bind_all(schedule_id, topology_id, backend, perf.size_bytes, perf.time_us, perf.algbw_GBps,
                perf.busbw_GBps, perf.bound_us, host_info, utc_now());
    q->run();
  });
}

Id Store::record_comparison(const ComparisonRecord& comparison) {
  return impl_->transaction("record_comparison", [&] {
    Id id = 0;
    {
      Query q = impl_->query(
          "INSERT INTO comparisons(topology_id, collective, model, created_at, options_json) "
          "VALUES (?1, ?2, ?3, ?4, ?5) RETURNING id");
      q->bind_all(comparison.topology_id, comparison.collective, comparison.model, utc_now(),
                  comparison.options_json);
      q->step();
      id = q->int64(0);
    }
    for (std::size_t k = 0; k < comparison.contenders.size(); ++k) {
      const ComparisonContender& c = comparison.contenders[k];
      if (c.choices.size() != c.results.size())
        misuse("record_comparison", "contender '" + c.name + "' has " +
                                        std::to_string(c.results.size()) + " results but " +
                                        std::to_string(c.choices.size()) + " choices");
      std::optional<Id> schedule_id;
      const std::string hash =
          schedule_hash_of("record_comparison", c.schedule_hash, c.schedule_json);
      if (!hash.empty())
        schedule_id =
            put_schedule_row(*impl_, hash, c.schedule_json, c.schedule_chunks, c.schedule_steps);
      const auto position = static_cast<std::int64_t>(k);
      {
        Query q = impl_->query(
            "INSERT INTO comparison_contenders(comparison_id, position, name, schedule_id, "
            "synthesis_s, status) VALUES (?1, ?2, ?3, ?4, ?5, ?6)");
        q->bind_all(id, position, c.name, schedule_id, c.synthesis_s, c.status);
        q->run();
      }
      for (std::size_t i = 0; i < c.results.size(); ++i) {
        const support::SizeResult& r = c.results[i];
        Query q = impl_->query(
            "INSERT INTO comparison_results(comparison_id, position, size_bytes, time_us, "
            "algbw_GBps, busbw_GBps, bound_us, choice) VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8)");
        q->bind_all(id, position, r.size_bytes, r.time_us, r.algbw_GBps, r.busbw_GBps, r.bound_us,
                    c.choices[i]);
        q->run();
      }
    }
    return id;
  });
}

Id Store::record_model_call(const ModelCall& call) {
  return impl_->transaction("record_model_call", [&] {
    Query q = impl_->query(
        "INSERT INTO model_calls(run_id, model, prompt_tokens, completion_tokens, latency_ms, "
        "request, response, called_at, purpose, request_hash, text_stored, cached, "
        "finish_reason, error, cost) "
        "VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, ?9, ?10, ?11, ?12, ?13, ?14, ?15) RETURNING id");
    q->bind_all(call.run_id, call.model, call.prompt_tokens, call.completion_tokens,
                call.latency_ms, call.request, call.response, utc_now(), call.purpose,
                call.request_hash, call.text_stored, call.cached, call.finish_reason, call.error,
                call.cost);
    q->step();
    return q->int64(0);
  });
}

Id Store::record_calibration(const CalibrationRecord& c) {
  return impl_->transaction("record_calibration", [&] {
    const Id topology_id = put_topology_row(*impl_, c.topology_name, c.topology_json);
    Query q = impl_->query(
        "INSERT INTO calibrations(created_at, host, backend, ranks, topology_id, checked, "
        "median_error_before, worst_error_before, median_error_after, worst_error_after, "
        "check_json, options_json) VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, ?9, ?10, ?11, ?12) "
        "RETURNING id");
    q->bind_all(utc_now(), c.host.empty() ? host_name() : c.host, c.backend, c.ranks, topology_id,
                c.checked, c.median_error_before, c.worst_error_before, c.median_error_after,
                c.worst_error_after, c.check_json, c.options_json);
    q->step();
    return q->int64(0);
  });
}

}  // namespace optiflow::db
