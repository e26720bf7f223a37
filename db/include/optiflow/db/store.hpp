// The SQLite store: every topology, run, program, compilation, schedule, simulation,
// hardware measurement and model call (docs/database.md).
#pragma once

#include <cstdint>
#include <memory>
#include <optional>
#include <stdexcept>
#include <string>
#include <vector>

#include "optiflow/support/hash.hpp"
#include "optiflow/support/size_result.hpp"

namespace optiflow::db {

/// A failed SQLite call: the call, the SQLite result code and its message. Also thrown, with
/// SQLITE_MISUSE (21), for a record that contradicts itself (say, compiled without a schedule
/// hash), and with SQLITE_ERROR (1) for a database whose schema is newer than this build.
class DbError : public std::runtime_error {
 public:
  DbError(const std::string& call, int code, const std::string& message)
      : std::runtime_error("sqlite: " + call + ": " + message + " (code " + std::to_string(code) +
                           ")"),
        code_(code),
        call_(call),
        message_(message) {}
  int code() const { return code_; }  ///< primary SQLite result code (SQLITE_CONSTRAINT = 19, ...)
  const std::string& call() const { return call_; }
  const std::string& message() const { return message_; }  ///< SQLite's text, without the call
  /// A UNIQUE, CHECK, NOT NULL or FOREIGN KEY constraint failed (e.g. a candidate recorded twice).
  bool is_constraint() const { return (code_ & 0xff) == 19; }

 private:
  int code_;
  std::string call_, message_;
};

using Id = std::int64_t;

struct RunInfo {
  Id id = 0;
  Id topology_id = 0;
  std::string topology_name;         ///< filled when read; ignored by begin_run
  std::string collective;            ///< "allgather", ...
  std::vector<std::uint64_t> sizes;  ///< bytes; read back ascending, without repeats
  std::string proposer;              ///< "offline" | "llm"
  std::uint64_t seed = 0;
  std::int64_t budget = 0;              ///< candidates
  std::string status;                   ///< "running" | "finished" | "interrupted" | "failed"
  std::string started_at, finished_at;  ///< ISO 8601 UTC; begin_run: empty started_at = now
  std::string host, git_revision;       ///< begin_run: empty host = this machine's name
  std::string options_json;             ///< everything else that defines the run
};

/// One evaluated candidate of a run, written in one transaction.
struct CandidateRecord {
  Id run_id = 0;
  std::int64_t seq = 0;        ///< 0, 1, 2, ... within the run
  std::int64_t iteration = 0;  ///< proposal round
  std::int64_t island = 0;     ///< population island / cell
  std::string program_source;
  std::string origin;  ///< offline | llm | baseline | import | user
  std::vector<Id> parent_program_ids;
  std::string collective;
  bool compiled = false;
  std::string diagnostics;  ///< when !compiled
  double compile_ms = 0;
  std::string schedule_hash;  ///< when compiled; empty: content_hash(schedule_json)
  std::string schedule_json;  ///< stored only when non-empty (e.g. winners)
  std::int64_t schedule_chunks = 0, schedule_steps = 0;
  std::string model = "alpha-beta";
  std::vector<support::SizeResult> sims;  ///< per size; only when compiled
  /// The model call whose reply proposed it (0: none). The program's origin is the one it was
  /// first stored with; `origin` above is also kept per candidate.
  Id model_call_id = 0;
};

/// A committed candidate, as candidates() gives it back.
struct StoredCandidate {
  std::int64_t seq = 0, iteration = 0, island = 0;
  Id program_id = 0;
  std::string program_source;
  bool compiled = false;
  std::string diagnostics;
  std::string schedule_hash;
  std::vector<support::SizeResult> sims;  ///< the candidate's model, at the run's sizes, ascending
};

/// The outcome of compiling a program for a topology and collective (the compile cache).
struct CompilationInfo {
  Id program_id = 0;
  bool compiled = false;
  std::string diagnostics;
  double compile_ms = 0;
  std::string schedule_hash;  ///< when compiled
  std::int64_t schedule_chunks = 0, schedule_steps = 0;
};

/// Best program per size for a topology and collective, across runs (history).
struct BestEntry {
  std::uint64_t size_bytes = 0;
  Id run_id = 0;
  Id program_id = 0;
  std::string schedule_hash;
  support::SizeResult perf;
};

struct ProgramInfo {
  Id id = 0;
  std::string hash, source, origin, created_at;
  std::vector<Id> parents;  ///< in the order first recorded
};

struct HistoryFilter {
  std::string topology;    ///< name, empty = any
  std::string collective;  ///< empty = any
  std::string origin;      ///< program origin, empty = any
  std::string since;       ///< ISO date/time, runs started at or after it; empty = any
  Id run_id = 0;           ///< one run; 0 = any
};

/// Counts over a run's committed candidates.
struct RunStats {
  std::int64_t candidates = 0;
  std::int64_t compiled = 0;
  std::int64_t last_iteration = -1;  ///< -1: none yet
};

/// One simulation row of one candidate (history, CSV/JSON export).
struct ResultRow {
  Id run_id = 0;
  std::int64_t seq = 0, iteration = 0;
  Id program_id = 0;
  std::string origin, topology, collective, model, schedule_hash;
  std::string recorded_at;  ///< when the candidate was committed, ISO 8601 UTC
  support::SizeResult perf;
};

/// One call to a language model, as recorded by the proposer (docs/llm.md). The request is
/// the body sent (it never holds the API key); with text_stored false, request and response
/// hold only their content hashes and the call cannot be replayed.
struct ModelCall {
  Id id = 0;
  Id run_id = 0;
  std::string model;
  std::string purpose = "propose";  ///< "initial" | "propose" | "repair"
  std::int64_t prompt_tokens = 0, completion_tokens = 0;
  double latency_ms = 0;
  double cost = 0;           ///< in the configured currency; 0 when no price is configured
  std::string request_hash;  ///< content_hash of the request body: the replay cache's key
  std::string request, response;
  bool text_stored = true;
  bool cached = false;          ///< answered from the replay cache, not by the server
  std::string finish_reason;    ///< "stop", "length", ...
  std::string error;            ///< why the call failed; empty when it succeeded
  std::string called_at;        ///< filled when read
  std::int64_t candidates = 0;  ///< filled when read: the candidates its reply became
};

/// A run's model calls, summed.
struct ModelCallTotals {
  std::int64_t calls = 0, cached = 0, failed = 0;
  std::int64_t prompt_tokens = 0, completion_tokens = 0;  ///< of calls the server answered
  double cost = 0, latency_ms = 0;
};

/// One contender of a comparison study and its results per size.
struct ComparisonContender {
  std::string name;           ///< "ours", "nccl", a file name, ...
  std::string schedule_hash;  ///< its schedule, stored; empty when it has none of one piece
  std::string schedule_json;  ///< stored with the schedule when non-empty
  std::int64_t schedule_chunks = 0, schedule_steps = 0;
  double synthesis_s = 0;  ///< time to build its schedule (search, solver, construction)
  std::string status;      ///< how it was built: "optimal", "time limit, gap 3%", a note, ...
  std::vector<support::SizeResult> results;
  std::vector<std::string> choices;  ///< per result: what ran at that size ("ring/LL", ...)
};

/// `optiflow compare`: contenders on one topology, collective and model.
struct ComparisonRecord {
  Id id = 0;  ///< filled when read
  Id topology_id = 0;
  std::string topology_name;  ///< filled when read
  std::string collective, model;
  std::string created_at;    ///< filled when read
  std::string options_json;  ///< what else defines it (sizes, contenders asked for)
  std::vector<ComparisonContender> contenders;
};

/// One `optiflow calibrate`: the calibrated topology and the simulator check that came with
/// it (docs/cluster.md). Errors are |simulated - measured| / measured, as fractions.
struct CalibrationRecord {
  Id id = 0;               ///< filled when read
  std::string created_at;  ///< filled when read
  std::string host;        ///< empty when recorded: this machine's name
  std::string backend;     ///< "mpi", ...
  std::int64_t ranks = 0;
  std::string topology_name, topology_json;  ///< stored in topologies (deduplicated)
  Id topology_id = 0;                        ///< filled when read
  bool checked = false;                      ///< the simulator check ran (no --no-check)
  double median_error_before = 0, worst_error_before = 0;
  double median_error_after = 0, worst_error_after = 0;
  std::string check_json = "[]";  ///< the check's rows, a JSON array
  std::string options_json = "{}";
};

/// One SQLite file: WAL mode, foreign keys on, schema migrated forward on open, every write
/// in a transaction. Readers (the GUI, `optiflow history`) may open it while a run writes.
/// A Store is one connection: use it from one thread at a time (open one per thread).
class Store {
 public:
  /// Opens (creating if needed) and migrates to the current schema version. Throws DbError
  /// for a file SQLite cannot open and for a schema newer than kSchemaVersion.
  static Store open(const std::string& path);
  /// Opens an existing file for reading only: never migrates or writes, so that a database on
  /// read-only media (or kept as evidence) can be queried. Throws DbError for a file that is
  /// missing, not SQLite, or of a schema newer than kSchemaVersion.
  static Store open_read_only(const std::string& path);
  ~Store();
  Store(Store&&) noexcept;
  Store& operator=(Store&&) noexcept;

  static constexpr int kSchemaVersion = 4;
  int schema_version() const;

  /// Stores a topology once per content hash of its JSON; returns its id. The name is the
  /// one given first.
  Id put_topology(const std::string& name, const std::string& topology_json);

  Id begin_run(RunInfo info);  ///< info.id ignored; status "running"
  std::optional<RunInfo> run(Id id) const;
  std::vector<RunInfo> runs(const HistoryFilter& filter = {}) const;  ///< by start time
  /// Sets finished_at unless "running" (which clears it: a resumed run). Unknown id: DbError.
  void set_run_status(Id id, const std::string& status);
  RunStats run_stats(Id run_id) const;

  /// Writes program (deduplicated by hash, parents recorded), compilation (deduplicated per
  /// program/topology/collective; the newest outcome is kept), schedule (by hash), simulation
  /// rows (kept once per schedule/topology/model/size), and the run's candidate row, all in
  /// one transaction. A candidate (run, seq) is written at most once: recording it again is
  /// a DbError with is_constraint(), and nothing of the second record is written. Returns the
  /// program's id.
  Id record_candidate(const CandidateRecord& record);
  /// The candidates of a run already committed, in seq order (for --resume).
  std::vector<StoredCandidate> candidates(Id run_id) const;

  /// Stores a schedule once per hash (empty hash: content_hash(schedule_json)); fills in the
  /// JSON of one stored without it (a run's winners). Returns its id.
  Id put_schedule(const std::string& schedule_hash, const std::string& schedule_json,
                  std::int64_t chunks, std::int64_t steps);

  /// Cached compilation of a program (by content) for a topology and collective, if any.
  std::optional<CompilationInfo> cached_compilation(const std::string& program_source,
                                                    Id topology_id,
                                                    const std::string& collective) const;
  /// Cached simulation of a schedule (by hash) on a topology and model, if any.
  std::optional<std::vector<support::SizeResult>> cached_sims(const std::string& schedule_hash,
                                                              Id topology_id,
                                                              const std::string& model) const;

  /// Best result per size over all runs matching the filter (lowest time_us; ties: earliest).
  std::vector<BestEntry> best(const HistoryFilter& filter,
                              const std::string& model = "alpha-beta") const;
  /// Every simulation row of every candidate matching the filter, all models, at the runs'
  /// sizes, ordered by run, seq, model, size.
  std::vector<ResultRow> results(const HistoryFilter& filter) const;
  std::optional<ProgramInfo> program(Id id) const;
  std::optional<std::string> schedule_json(const std::string& schedule_hash) const;
  /// All simulation rows (and hardware measurements) of a program's schedules, with the
  /// topology name and model.
  struct ProgramResult {
    std::string topology, collective, model;
    std::string schedule_hash;
    std::string backend;    ///< non-empty: measured on hardware with this backend (model empty)
    std::string host_info;  ///< hardware rows only
    support::SizeResult perf;
  };
  std::vector<ProgramResult> program_results(Id program_id) const;

  /// Every hardware measurement with its schedule's JSON (those stored without their JSON are
  /// left out), by schedule, backend and size.
  struct HwMeasurement {
    std::string schedule_hash, schedule_json, topology, backend, host_info;
    support::SizeResult perf;
  };
  std::vector<HwMeasurement> hw_measurements() const;

  /// Hardware measurements and model calls (written by later features; readable now).
  /// record_hw_result needs the schedule stored first (record_candidate or put_schedule).
  void record_hw_result(const std::string& schedule_hash, Id topology_id,
                        const std::string& backend, const support::SizeResult& perf,
                        const std::string& host_info);
  /// Records a model call (call.id and called_at ignored); returns its id.
  Id record_model_call(const ModelCall& call);
  std::vector<ModelCall> model_calls(Id run_id) const;
  /// The earliest successful call with this request hash whose text is stored, from any run:
  /// what `--cache` answers from.
  std::optional<ModelCall> cached_model_call(const std::string& request_hash) const;
  /// The latest run other than `except_run` whose first model call had this request hash: the
  /// recorded run a replay follows.
  std::optional<Id> run_opened_by(const std::string& request_hash, Id except_run) const;
  /// Totals over a run's calls. Tokens and cost count only calls the server answered.
  ModelCallTotals model_call_totals(Id run_id) const;
  /// The model calls whose replies held this program (as a candidate of some run), by id.
  std::vector<ModelCall> model_calls_of_program(Id program_id) const;

  /// Records a comparison study, its contenders' schedules and results; returns its id.
  Id record_comparison(const ComparisonRecord& comparison);
  /// Comparisons (newest first) matching the filter's topology, collective and since.
  std::vector<ComparisonRecord> comparisons(const HistoryFilter& filter = {}) const;

  /// Records a calibration and its topology; returns its id.
  Id record_calibration(const CalibrationRecord& calibration);
  /// Every calibration, newest first.
  std::vector<CalibrationRecord> calibrations() const;

  struct Impl;  ///< opaque

 private:
  explicit Store(std::unique_ptr<Impl> impl);
  std::unique_ptr<Impl> impl_;
};

/// Content hash of programs, schedules and topologies (support::content_hash). Where a hash
/// matches, the stored text is compared too, so a collision is reported (DbError) rather than
/// merging two different contents.
using support::content_hash;

}  // namespace optiflow::db
