// The schema as an ordered list of forward migrations, one SQL script per version
// (docs/database.md). A migration is never edited once released: add the next one.
#include <array>
#include <string>
#include <string_view>

#include "store_impl.hpp"

namespace optiflow::db {
namespace {

struct Migration {
  int version;  ///< PRAGMA user_version after it
  std::string_view what;
  const char* sql;
};

constexpr std::array kMigrations{
    Migration{1, "initial schema", R"sql(
CREATE TABLE topologies (
  id          INTEGER PRIMARY KEY,
  hash        TEXT NOT NULL UNIQUE,
  name        TEXT NOT NULL,
  json        TEXT NOT NULL,
  created_at  TEXT NOT NULL
);
CREATE INDEX topologies_by_name ON topologies(name);

CREATE TABLE runs (
  id            INTEGER PRIMARY KEY,
  topology_id   INTEGER NOT NULL REFERENCES topologies(id),
  collective    TEXT NOT NULL,
  proposer      TEXT NOT NULL,
  seed          INTEGER NOT NULL,
  budget        INTEGER NOT NULL,
  status        TEXT NOT NULL CHECK (status IN ('running', 'finished', 'interrupted', 'failed')),
  started_at    TEXT NOT NULL,
  finished_at   TEXT,
  host          TEXT NOT NULL,
  git_revision  TEXT NOT NULL,
  options_json  TEXT NOT NULL
);
CREATE INDEX runs_by_topology ON runs(topology_id, collective, started_at);
CREATE INDEX runs_by_start ON runs(started_at);

CREATE TABLE run_sizes (
  run_id      INTEGER NOT NULL REFERENCES runs(id),
  size_bytes  INTEGER NOT NULL CHECK (size_bytes > 0),
  PRIMARY KEY (run_id, size_bytes)
) WITHOUT ROWID;

CREATE TABLE programs (
  id          INTEGER PRIMARY KEY,
  hash        TEXT NOT NULL UNIQUE,
  source      TEXT NOT NULL,
  origin      TEXT NOT NULL CHECK (origin IN ('offline', 'llm', 'baseline', 'import', 'user')),
  created_at  TEXT NOT NULL
);
CREATE INDEX programs_by_origin ON programs(origin);

CREATE TABLE program_parents (
  program_id  INTEGER NOT NULL REFERENCES programs(id),
  parent_id   INTEGER NOT NULL REFERENCES programs(id),
  UNIQUE (program_id, parent_id),
  CHECK (program_id <> parent_id)
);
CREATE INDEX program_children ON program_parents(parent_id);

CREATE TABLE schedules (
  id          INTEGER PRIMARY KEY,
  hash        TEXT NOT NULL UNIQUE,
  json        TEXT,
  chunks      INTEGER NOT NULL,
  steps       INTEGER NOT NULL,
  created_at  TEXT NOT NULL
);

CREATE TABLE compilations (
  id           INTEGER PRIMARY KEY,
  program_id   INTEGER NOT NULL REFERENCES programs(id),
  topology_id  INTEGER NOT NULL REFERENCES topologies(id),
  collective   TEXT NOT NULL,
  compiled     INTEGER NOT NULL CHECK (compiled IN (0, 1)),
  diagnostics  TEXT NOT NULL,
  compile_ms   REAL NOT NULL,
  schedule_id  INTEGER REFERENCES schedules(id),
  compiled_at  TEXT NOT NULL,
  UNIQUE (program_id, topology_id, collective),
  CHECK (compiled = (schedule_id IS NOT NULL))
);
CREATE INDEX compilations_by_schedule ON compilations(schedule_id);

CREATE TABLE simulations (
  schedule_id   INTEGER NOT NULL REFERENCES schedules(id),
  topology_id   INTEGER NOT NULL REFERENCES topologies(id),
  model         TEXT NOT NULL,
  size_bytes    INTEGER NOT NULL,
  time_us       REAL NOT NULL,
  algbw_GBps    REAL NOT NULL,
  busbw_GBps    REAL NOT NULL,
  bound_us      REAL NOT NULL,
  simulated_at  TEXT NOT NULL,
  PRIMARY KEY (schedule_id, topology_id, model, size_bytes)
) WITHOUT ROWID;

CREATE TABLE hw_results (
  id           INTEGER PRIMARY KEY,
  schedule_id  INTEGER NOT NULL REFERENCES schedules(id),
  topology_id  INTEGER NOT NULL REFERENCES topologies(id),
  backend      TEXT NOT NULL,
  size_bytes   INTEGER NOT NULL,
  time_us      REAL NOT NULL,
  algbw_GBps   REAL NOT NULL,
  busbw_GBps   REAL NOT NULL,
  bound_us     REAL NOT NULL,
  host_info    TEXT NOT NULL,
  measured_at  TEXT NOT NULL
);
CREATE INDEX hw_results_by_schedule ON hw_results(schedule_id, topology_id, backend, size_bytes);

CREATE TABLE candidates (
  run_id          INTEGER NOT NULL REFERENCES runs(id),
  seq             INTEGER NOT NULL CHECK (seq >= 0),
  iteration       INTEGER NOT NULL,
  island          INTEGER NOT NULL,
  program_id      INTEGER NOT NULL REFERENCES programs(id),
  compilation_id  INTEGER NOT NULL REFERENCES compilations(id),
  schedule_id     INTEGER REFERENCES schedules(id),
  model           TEXT NOT NULL,
  recorded_at     TEXT NOT NULL,
  PRIMARY KEY (run_id, seq)
) WITHOUT ROWID;
CREATE INDEX candidates_by_program ON candidates(program_id);
CREATE INDEX candidates_by_schedule ON candidates(schedule_id);

CREATE TABLE model_calls (
  id                 INTEGER PRIMARY KEY,
  run_id             INTEGER NOT NULL REFERENCES runs(id),
  model              TEXT NOT NULL,
  prompt_tokens      INTEGER NOT NULL,
  completion_tokens  INTEGER NOT NULL,
  latency_ms         REAL NOT NULL,
  request            TEXT NOT NULL,
  response           TEXT NOT NULL,
  called_at          TEXT NOT NULL
);
CREATE INDEX model_calls_by_run ON model_calls(run_id);
)sql"},
    Migration{2, "model calls for the language-model proposer", R"sql(
ALTER TABLE model_calls ADD COLUMN purpose TEXT NOT NULL DEFAULT 'propose';
ALTER TABLE model_calls ADD COLUMN request_hash TEXT NOT NULL DEFAULT '';
ALTER TABLE model_calls ADD COLUMN text_stored INTEGER NOT NULL DEFAULT 1;
ALTER TABLE model_calls ADD COLUMN cached INTEGER NOT NULL DEFAULT 0;
ALTER TABLE model_calls ADD COLUMN finish_reason TEXT NOT NULL DEFAULT '';
ALTER TABLE model_calls ADD COLUMN error TEXT NOT NULL DEFAULT '';
ALTER TABLE model_calls ADD COLUMN cost REAL NOT NULL DEFAULT 0;
CREATE INDEX model_calls_by_request ON model_calls(request_hash);

ALTER TABLE candidates ADD COLUMN origin TEXT NOT NULL DEFAULT '';
ALTER TABLE candidates ADD COLUMN model_call_id INTEGER REFERENCES model_calls(id);
)sql"},
    Migration{3, "comparison studies", R"sql(
CREATE TABLE comparisons (
  id            INTEGER PRIMARY KEY,
  topology_id   INTEGER NOT NULL REFERENCES topologies(id),
  collective    TEXT NOT NULL,
  model         TEXT NOT NULL,
  created_at    TEXT NOT NULL,
  options_json  TEXT NOT NULL
);
CREATE INDEX comparisons_by_topology ON comparisons(topology_id, collective, created_at);

CREATE TABLE comparison_contenders (
  comparison_id  INTEGER NOT NULL REFERENCES comparisons(id),
  position       INTEGER NOT NULL,
  name           TEXT NOT NULL,
  schedule_id    INTEGER REFERENCES schedules(id),
  synthesis_s    REAL NOT NULL,
  status         TEXT NOT NULL,
  PRIMARY KEY (comparison_id, position)
) WITHOUT ROWID;

CREATE TABLE comparison_results (
  comparison_id  INTEGER NOT NULL REFERENCES comparisons(id),
  position       INTEGER NOT NULL,
  size_bytes     INTEGER NOT NULL,
  time_us        REAL NOT NULL,
  algbw_GBps     REAL NOT NULL,
  busbw_GBps     REAL NOT NULL,
  bound_us       REAL NOT NULL,
  choice         TEXT NOT NULL,
  PRIMARY KEY (comparison_id, position, size_bytes)
) WITHOUT ROWID;
)sql"},
    Migration{4, "calibrations", R"sql(
CREATE TABLE calibrations (
  id                   INTEGER PRIMARY KEY,
  created_at           TEXT NOT NULL,
  host                 TEXT NOT NULL,
  backend              TEXT NOT NULL,
  ranks                INTEGER NOT NULL CHECK (ranks > 0),
  topology_id          INTEGER NOT NULL REFERENCES topologies(id),
  checked              INTEGER NOT NULL CHECK (checked IN (0, 1)),
  median_error_before  REAL NOT NULL,
  worst_error_before   REAL NOT NULL,
  median_error_after   REAL NOT NULL,
  worst_error_after    REAL NOT NULL,
  check_json           TEXT NOT NULL,
  options_json         TEXT NOT NULL
);
CREATE INDEX calibrations_by_time ON calibrations(created_at);
)sql"},
};

static_assert(kMigrations.back().version == Store::kSchemaVersion,
              "Store::kSchemaVersion must be the version of the last migration");

void apply(Store::Impl& impl, const Migration& migration) {
  char* error = nullptr;
  const int rc = sqlite3_exec(impl.db, migration.sql, nullptr, nullptr, &error);
  if (rc != SQLITE_OK) {
    const std::string message = error != nullptr ? error : sqlite3_errstr(rc);
    sqlite3_free(error);
    throw DbError(
        "migration " + std::to_string(migration.version) + " (" + std::string(migration.what) + ")",
        rc & 0xff, message);
  }
  impl.exec(("PRAGMA user_version = " + std::to_string(migration.version)).c_str());
}

[[noreturn]] void refuse_newer(int version) {
  throw DbError("open", SQLITE_ERROR,
                "the database has schema version " + std::to_string(version) + ", newer than the " +
                    std::to_string(Store::kSchemaVersion) +
                    " this build of optiflow knows; use a newer optiflow");
}

}  // namespace

int user_version(sqlite3* db) {
  Statement statement(db, "PRAGMA user_version");
  statement.step();
  return static_cast<int>(statement.int64(0));
}

void migrate(Store::Impl& impl) {
  const int found = user_version(impl.db);
  if (found > Store::kSchemaVersion) refuse_newer(found);
  if (found == Store::kSchemaVersion) return;
  impl.transaction("migrate", [&] {
    const int version = user_version(impl.db);  // another process may have migrated meanwhile
    if (version > Store::kSchemaVersion) refuse_newer(version);
    for (const Migration& migration : kMigrations)
      if (migration.version > version) apply(impl, migration);
  });
}

}  // namespace optiflow::db
