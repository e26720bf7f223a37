// The SQLite store: schema and migrations, deduplication by content hash, candidates and their
// idempotency, caches, readers beside a writer, and a writer killed with SIGKILL.
#include "optiflow/db/store.hpp"

#include <gtest/gtest.h>
#include <signal.h>
#include <sqlite3.h>
#include <sys/wait.h>
#include <unistd.h>

#include <atomic>
#include <chrono>
#include <filesystem>
#include <thread>

#include "temp_db.hpp"

namespace optiflow::db {
namespace {

namespace fs = std::filesystem;
using namespace std::chrono_literals;

constexpr int kSqliteError = 1, kSqliteNotFound = 12, kSqliteMisuse = 21;

using test_support::TempDb;

// A connection of our own, for what the Store does not offer: PRAGMAs, row counts, raw writes.
class Raw {
 public:
  explicit Raw(const std::string& path) {
    if (sqlite3_open_v2(path.c_str(), &db_, SQLITE_OPEN_READWRITE, nullptr) != SQLITE_OK)
      throw std::runtime_error("cannot open " + path);
    sqlite3_busy_timeout(db_, 5000);
  }
  ~Raw() { sqlite3_close(db_); }
  Raw(const Raw&) = delete;
  Raw& operator=(const Raw&) = delete;

  void exec(const std::string& sql) {
    char* error = nullptr;
    if (sqlite3_exec(db_, sql.c_str(), nullptr, nullptr, &error) != SQLITE_OK) {
      const std::string message = error != nullptr ? error : "?";
      sqlite3_free(error);
      throw std::runtime_error(sql + ": " + message);
    }
  }
  /// The first column of the first row, as text ("" for none).
  std::string text(const std::string& sql) {
    sqlite3_stmt* stmt = nullptr;
    if (sqlite3_prepare_v2(db_, sql.c_str(), -1, &stmt, nullptr) != SQLITE_OK)
      throw std::runtime_error(sql + ": " + sqlite3_errmsg(db_));
    std::string value;
    if (sqlite3_step(stmt) == SQLITE_ROW && sqlite3_column_text(stmt, 0) != nullptr)
      value = reinterpret_cast<const char*>(sqlite3_column_text(stmt, 0));
    sqlite3_finalize(stmt);
    return value;
  }
  std::int64_t count(const std::string& table) {
    return std::stoll(text("SELECT COUNT(*) FROM " + table));
  }

 private:
  sqlite3* db_ = nullptr;
};

constexpr std::uint64_t kSmall = 1024, kLarge = 1 << 20;

std::string schedule_of(const std::string& source) {
  return R"({"schedule":")" + source + R"("})";
}

// A compiled candidate whose schedule JSON is derived from its source; times scale with `slow`.
CandidateRecord compiled_candidate(Id run, std::int64_t seq, const std::string& source,
                                   double slow = 1.0) {
  CandidateRecord record;
  record.run_id = run;
  record.seq = seq;
  record.iteration = seq / 4;
  record.island = seq % 2;
  record.program_source = source;
  record.origin = "offline";
  record.collective = "allgather";
  record.compiled = true;
  record.compile_ms = 1.5;
  record.schedule_json = schedule_of(source);
  record.schedule_chunks = 4;
  record.schedule_steps = 12;
  record.sims = {support::SizeResult{kSmall, 10 * slow, 0.1 / slow, 0.075 / slow, 2},
                 support::SizeResult{kLarge, 100 * slow, 10 / slow, 7.5 / slow, 50}};
  return record;
}

std::string numbered_source(std::int64_t seq) {
  return "program p" + std::to_string(seq) + " { ring(); }";
}

std::int64_t rows_everywhere(Raw& raw) {
  std::int64_t total = 0;
  for (const char* table :
       {"topologies", "runs", "run_sizes", "programs", "program_parents", "schedules",
        "compilations", "simulations", "hw_results", "candidates", "model_calls"})
    total += raw.count(table);
  return total;
}

class StoreTest : public ::testing::Test {
 protected:
  Id begin(Id topology, const std::string& collective, const std::string& started_at = "") {
    RunInfo info;
    info.topology_id = topology;
    info.collective = collective;
    info.sizes = {kLarge, kSmall, kSmall};
    info.proposer = "offline";
    info.seed = 0xfedcba9876543210ULL;  // above INT64_MAX: stored bit for bit
    info.budget = 100;
    info.started_at = started_at;
    info.git_revision = "abc123";
    info.options_json = R"({"islands":2})";
    return store_.begin_run(info);
  }

  TempDb db_;
  Store store_ = Store::open(db_.path());
  Id topo_ = store_.put_topology("ring4", R"({"name":"ring4","nodes":[]})");
  Id run_ = begin(topo_, "allgather");
};

TEST(StoreSchema, CreatesMigratesAndReopens) {
  TempDb db;
  Id topo = 0;
  {
    Store store = Store::open(db.path());
    EXPECT_EQ(store.schema_version(), Store::kSchemaVersion);
    topo = store.put_topology("t", "{}");
  }
  Raw raw(db.path());
  EXPECT_EQ(raw.text("PRAGMA user_version"), std::to_string(Store::kSchemaVersion));
  for (const char* table : {"topologies", "runs", "run_sizes", "programs", "program_parents",
                            "schedules", "compilations", "simulations", "hw_results", "candidates",
                            "model_calls", "comparisons", "calibrations"})
    EXPECT_EQ(
        raw.text(std::string("SELECT name FROM sqlite_master WHERE type = 'table' AND name = '") +
                 table + "'"),
        table);
  Store again = Store::open(db.path());
  EXPECT_EQ(again.schema_version(), Store::kSchemaVersion);
  EXPECT_EQ(again.put_topology("t", "{}"), topo);
  EXPECT_EQ(raw.count("topologies"), 1);
}

TEST(StoreSchema, RefusesANewerDatabase) {
  TempDb db;
  { Store::open(db.path()); }
  Raw(db.path()).exec("PRAGMA user_version = " + std::to_string(Store::kSchemaVersion + 1));
  try {
    Store::open(db.path());
    FAIL() << "opened a database newer than the code";
  } catch (const DbError& e) {
    EXPECT_EQ(e.code(), kSqliteError);
    EXPECT_NE(std::string(e.what()).find("newer"), std::string::npos) << e.what();
  }
}

TEST(StoreSchema, ReportsAFileItCannotOpen) {
  EXPECT_THROW(Store::open("/nonexistent-folder-of-optiflow/x.db"), DbError);
}

TEST_F(StoreTest, UsesWalAndForeignKeys) {
  Raw raw(db_.path());
  EXPECT_EQ(raw.text("PRAGMA journal_mode"), "wal");
  EXPECT_TRUE(fs::exists(db_.path() + "-wal"));
  CandidateRecord orphan = compiled_candidate(run_, 0, "p");
  orphan.parent_program_ids = {4242};
  try {
    store_.record_candidate(orphan);
    FAIL() << "a parent that does not exist was accepted";
  } catch (const DbError& e) {
    EXPECT_TRUE(e.is_constraint()) << e.what();
    EXPECT_EQ(e.call().rfind("record_candidate", 0), 0u) << e.what();
  }
  EXPECT_THROW(begin(9999, "allgather"), DbError);
  EXPECT_EQ(raw.count("programs"), 0);
}

TEST(StoreHash, IsFnv1a64InHex) {
  EXPECT_EQ(content_hash(""), "cbf29ce484222325");
  EXPECT_EQ(content_hash("a"), "af63dc4c8601ec8c");
  EXPECT_EQ(content_hash("foobar"), "85944171f73967e8");
}

TEST_F(StoreTest, RunRoundTripsAndStatusSetsFinishTime) {
  const std::optional<RunInfo> run = store_.run(run_);
  ASSERT_TRUE(run);
  EXPECT_EQ(run->topology_name, "ring4");
  EXPECT_EQ(run->sizes, (std::vector<std::uint64_t>{kSmall, kLarge}));
  EXPECT_EQ(run->seed, 0xfedcba9876543210ULL);
  EXPECT_EQ(run->status, "running");
  EXPECT_EQ(run->started_at.size(), 24u) << run->started_at;  // 2026-03-05T14:07:31.042Z
  EXPECT_EQ(run->started_at.back(), 'Z');
  EXPECT_FALSE(run->host.empty());
  EXPECT_EQ(run->options_json, R"({"islands":2})");
  EXPECT_TRUE(run->finished_at.empty());

  store_.set_run_status(run_, "interrupted");
  EXPECT_EQ(store_.run(run_)->status, "interrupted");
  EXPECT_FALSE(store_.run(run_)->finished_at.empty());
  store_.set_run_status(run_, "running");  // resumed
  EXPECT_TRUE(store_.run(run_)->finished_at.empty());
  EXPECT_THROW(store_.set_run_status(run_, "paused"), DbError);
  try {
    store_.set_run_status(777, "finished");
    FAIL();
  } catch (const DbError& e) {
    EXPECT_EQ(e.code(), kSqliteNotFound);
  }
  EXPECT_FALSE(store_.run(777));
}

TEST_F(StoreTest, DeduplicatesTopologiesProgramsAndSchedulesByHash) {
  EXPECT_EQ(store_.put_topology("other name", R"({"name":"ring4","nodes":[]})"), topo_);
  EXPECT_NE(store_.put_topology("ring8", R"({"name":"ring8"})"), topo_);

  store_.record_candidate(compiled_candidate(run_, 0, "same"));
  store_.record_candidate(compiled_candidate(run_, 1, "same"));
  const Id run2 = begin(topo_, "allgather");
  store_.record_candidate(compiled_candidate(run2, 0, "same"));
  const auto stored = store_.candidates(run_);
  ASSERT_EQ(stored.size(), 2u);
  EXPECT_EQ(stored[0].program_id, stored[1].program_id);
  EXPECT_EQ(stored[0].schedule_hash, content_hash(schedule_of("same")));

  Raw raw(db_.path());
  EXPECT_EQ(raw.count("programs"), 1);
  EXPECT_EQ(raw.count("schedules"), 1);
  EXPECT_EQ(raw.count("compilations"), 1);
  EXPECT_EQ(raw.count("simulations"), 2);
  EXPECT_EQ(raw.count("candidates"), 3);
}

TEST_F(StoreTest, ReportsAHashCollision) {
  Raw(db_.path())
      .exec("INSERT INTO programs(hash, source, origin, created_at) VALUES ('" +
            content_hash("mine") + "', 'not mine', 'user', '2026-01-01T00:00:00.000Z')");
  try {
    store_.record_candidate(compiled_candidate(run_, 0, "mine"));
    FAIL() << "two different programs merged under one hash";
  } catch (const DbError& e) {
    EXPECT_NE(std::string(e.what()).find("collision"), std::string::npos) << e.what();
  }
  EXPECT_TRUE(store_.candidates(run_).empty());
}

TEST_F(StoreTest, RecordsParentsInOrder) {
  store_.record_candidate(compiled_candidate(run_, 0, "A"));
  const Id a = store_.candidates(run_)[0].program_id;
  CandidateRecord b = compiled_candidate(run_, 1, "B");
  b.parent_program_ids = {a};
  store_.record_candidate(b);
  const Id b_id = store_.candidates(run_)[1].program_id;
  CandidateRecord c = compiled_candidate(run_, 2, "C");
  c.origin = "llm";
  c.parent_program_ids = {b_id, a};
  store_.record_candidate(c);
  c.seq = 3;  // proposed again from the same parents and itself: nothing new
  const Id c_id = store_.candidates(run_)[2].program_id;
  c.parent_program_ids = {a, c_id};
  store_.record_candidate(c);

  const std::optional<ProgramInfo> info = store_.program(c_id);
  ASSERT_TRUE(info);
  EXPECT_EQ(info->parents, (std::vector<Id>{b_id, a}));
  EXPECT_EQ(info->origin, "llm");
  EXPECT_EQ(info->source, "C");
  EXPECT_EQ(info->hash, content_hash("C"));
  EXPECT_TRUE(store_.program(a)->parents.empty());
  EXPECT_FALSE(store_.program(999));
}

TEST_F(StoreTest, CandidatesRoundTripInSeqOrder) {
  CandidateRecord failed;
  failed.run_id = run_;
  failed.seq = 1;
  failed.iteration = 0;
  failed.island = 1;
  failed.program_source = "broken(";
  failed.origin = "llm";
  failed.collective = "allgather";
  failed.diagnostics = "prog:1:7: error: expected ')'";
  store_.record_candidate(failed);
  store_.record_candidate(compiled_candidate(run_, 0, "ok"));
  CandidateRecord hashed = compiled_candidate(run_, 2, "hash only");
  hashed.schedule_hash = content_hash(hashed.schedule_json);
  hashed.schedule_json.clear();
  store_.record_candidate(hashed);

  const auto stored = store_.candidates(run_);
  ASSERT_EQ(stored.size(), 3u);
  EXPECT_EQ(stored[0].seq, 0);
  EXPECT_TRUE(stored[0].compiled);
  EXPECT_EQ(stored[0].program_source, "ok");
  ASSERT_EQ(stored[0].sims.size(), 2u);
  EXPECT_EQ(stored[0].sims[0].size_bytes, kSmall);
  EXPECT_DOUBLE_EQ(stored[0].sims[0].time_us, 10);
  EXPECT_DOUBLE_EQ(stored[0].sims[1].busbw_GBps, 7.5);
  EXPECT_DOUBLE_EQ(stored[0].sims[1].bound_us, 50);

  EXPECT_EQ(stored[1].seq, 1);
  EXPECT_EQ(stored[1].island, 1);
  EXPECT_FALSE(stored[1].compiled);
  EXPECT_EQ(stored[1].diagnostics, failed.diagnostics);
  EXPECT_TRUE(stored[1].schedule_hash.empty());
  EXPECT_TRUE(stored[1].sims.empty());

  EXPECT_EQ(stored[2].schedule_hash, hashed.schedule_hash);
  EXPECT_FALSE(store_.schedule_json(hashed.schedule_hash));  // stored only when given
  EXPECT_EQ(store_.schedule_json(stored[0].schedule_hash), schedule_of("ok"));

  const RunStats stats = store_.run_stats(run_);
  EXPECT_EQ(stats.candidates, 3);
  EXPECT_EQ(stats.compiled, 2);
  EXPECT_EQ(stats.last_iteration, 0);
}

TEST_F(StoreTest, DuplicateSeqIsRejectedAndNothingIsWritten) {
  store_.record_candidate(compiled_candidate(run_, 0, "first"));
  Raw raw(db_.path());
  const std::int64_t before = rows_everywhere(raw);

  CandidateRecord again = compiled_candidate(run_, 0, "a different program", 0.5);
  again.parent_program_ids = {store_.candidates(run_)[0].program_id};
  try {
    store_.record_candidate(again);
    FAIL() << "candidate (run, 0) recorded twice";
  } catch (const DbError& e) {
    EXPECT_TRUE(e.is_constraint()) << e.what();
    EXPECT_NE(std::string(e.what()).find("UNIQUE"), std::string::npos) << e.what();
  }
  EXPECT_EQ(rows_everywhere(raw), before);
  EXPECT_EQ(raw.count("programs"), 1);
  const auto stored = store_.candidates(run_);
  ASSERT_EQ(stored.size(), 1u);
  EXPECT_EQ(stored[0].program_source, "first");
  store_.record_candidate(compiled_candidate(run_, 1, "next"));  // the store is still usable
  EXPECT_EQ(store_.candidates(run_).size(), 2u);
}

TEST_F(StoreTest, ContradictoryRecordsAreMisuse) {
  CandidateRecord no_hash = compiled_candidate(run_, 0, "x");
  no_hash.schedule_json.clear();
  CandidateRecord wrong_hash = compiled_candidate(run_, 0, "x");
  wrong_hash.schedule_hash = "0000000000000000";
  CandidateRecord sims_without_schedule = compiled_candidate(run_, 0, "x");
  sims_without_schedule.compiled = false;
  sims_without_schedule.schedule_json.clear();
  for (const CandidateRecord& bad : {no_hash, wrong_hash, sims_without_schedule}) {
    try {
      store_.record_candidate(bad);
      FAIL() << "accepted a contradictory record";
    } catch (const DbError& e) {
      EXPECT_EQ(e.code(), kSqliteMisuse) << e.what();
    }
  }
  CandidateRecord unknown_run = compiled_candidate(4711, 0, "x");
  EXPECT_THROW(store_.record_candidate(unknown_run), DbError);
  EXPECT_TRUE(store_.candidates(run_).empty());
}

TEST_F(StoreTest, CachesCompilationsAndSimulations) {
  store_.record_candidate(compiled_candidate(run_, 0, "cached"));
  CandidateRecord failed = compiled_candidate(run_, 1, "fails");
  failed.compiled = false;
  failed.schedule_json.clear();
  failed.sims.clear();
  failed.diagnostics = "error: no";
  store_.record_candidate(failed);

  const std::string hash = content_hash(schedule_of("cached"));
  const auto sims = store_.cached_sims(hash, topo_, "alpha-beta");
  ASSERT_TRUE(sims);
  ASSERT_EQ(sims->size(), 2u);
  EXPECT_DOUBLE_EQ((*sims)[1].time_us, 100);
  EXPECT_FALSE(store_.cached_sims(hash, topo_, "flow"));
  EXPECT_FALSE(store_.cached_sims(hash, topo_ + 100, "alpha-beta"));
  EXPECT_FALSE(store_.cached_sims("ffffffffffffffff", topo_, "alpha-beta"));

  const auto compiled = store_.cached_compilation("cached", topo_, "allgather");
  ASSERT_TRUE(compiled);
  EXPECT_TRUE(compiled->compiled);
  EXPECT_EQ(compiled->schedule_hash, hash);
  EXPECT_EQ(compiled->schedule_steps, 12);
  EXPECT_DOUBLE_EQ(compiled->compile_ms, 1.5);
  const auto broken = store_.cached_compilation("fails", topo_, "allgather");
  ASSERT_TRUE(broken);
  EXPECT_FALSE(broken->compiled);
  EXPECT_EQ(broken->diagnostics, "error: no");
  EXPECT_FALSE(store_.cached_compilation("cached", topo_, "reducescatter"));
  EXPECT_FALSE(store_.cached_compilation("never seen", topo_, "allgather"));
}

TEST_F(StoreTest, SchedulesAreStoredOnceAndFilledInLater) {
  const std::string json = schedule_of("winner");
  const std::string hash = content_hash(json);
  const Id id = store_.put_schedule(hash, "", 2, 3);
  EXPECT_FALSE(store_.schedule_json(hash));
  EXPECT_EQ(store_.put_schedule("", json, 2, 3), id);
  EXPECT_EQ(store_.schedule_json(hash), json);
  EXPECT_EQ(store_.put_schedule(hash, json, 2, 3), id);
  EXPECT_THROW(store_.put_schedule(hash, json + " ", 2, 3), DbError);
}

TEST(StoreReadOnly, RefusesAMissingFileAndCreatesNothing) {
  TempDb missing;
  EXPECT_THROW(Store::open_read_only(missing.path()), DbError);
  EXPECT_FALSE(std::filesystem::exists(missing.path()));
}

TEST_F(StoreTest, HardwareResultsAndModelCalls) {
  store_.record_candidate(compiled_candidate(run_, 0, "measured"));
  const auto stored = store_.candidates(run_);
  try {
    store_.record_hw_result("ffffffffffffffff", topo_, "nccl",
                            support::SizeResult{kLarge, 90, 11, 8, 50}, "node0");
    FAIL();
  } catch (const DbError& e) {
    EXPECT_EQ(e.code(), kSqliteNotFound) << e.what();
  }
  store_.record_hw_result(stored[0].schedule_hash, topo_, "nccl",
                          support::SizeResult{kLarge, 90, 11, 8, 50}, "node0 8xH100");
  const auto results = store_.program_results(stored[0].program_id);
  ASSERT_EQ(results.size(), 3u);  // two simulations, one measurement
  EXPECT_EQ(results[0].topology, "ring4");
  EXPECT_EQ(results[0].collective, "allgather");
  EXPECT_EQ(results[0].model, "alpha-beta");
  EXPECT_EQ(results[0].perf.size_bytes, kSmall);
  EXPECT_EQ(results[2].backend, "nccl");
  EXPECT_EQ(results[2].host_info, "node0 8xH100");
  EXPECT_DOUBLE_EQ(results[2].perf.time_us, 90);

  // Read back with the schedule's JSON, by a reader that never writes.
  const Store reader = Store::open_read_only(db_.path());
  const auto measured = reader.hw_measurements();
  ASSERT_EQ(measured.size(), 1u);
  EXPECT_EQ(measured[0].schedule_hash, stored[0].schedule_hash);
  EXPECT_EQ(measured[0].schedule_json, *store_.schedule_json(stored[0].schedule_hash));
  EXPECT_EQ(measured[0].topology, "ring4");
  EXPECT_EQ(measured[0].backend, "nccl");
  EXPECT_DOUBLE_EQ(measured[0].perf.time_us, 90);

  ModelCall call;
  call.run_id = run_;
  call.model = "qwen";
  call.prompt_tokens = 1200;
  call.completion_tokens = 300;
  call.latency_ms = 850.5;
  call.cost = 0.25;
  call.request_hash = "0123456789abcdef";
  call.request = "{\"messages\":[]}";
  call.response = "{\"choices\":[]}";
  call.finish_reason = "stop";
  const Id first = store_.record_model_call(call);
  const auto calls = store_.model_calls(run_);
  ASSERT_EQ(calls.size(), 1u);
  EXPECT_EQ(calls[0].id, first);
  EXPECT_EQ(calls[0].model, "qwen");
  EXPECT_EQ(calls[0].purpose, "propose");
  EXPECT_EQ(calls[0].prompt_tokens, 1200);
  EXPECT_EQ(calls[0].completion_tokens, 300);
  EXPECT_DOUBLE_EQ(calls[0].latency_ms, 850.5);
  EXPECT_EQ(calls[0].response, "{\"choices\":[]}");
  EXPECT_EQ(calls[0].finish_reason, "stop");
  EXPECT_FALSE(calls[0].called_at.empty());
}

TEST_F(StoreTest, CalibrationsRoundTripNewestFirstWithTheirTopology) {
  CalibrationRecord c;
  c.backend = "mpi";
  c.ranks = 2;
  c.topology_name = "calibrated-mpi2";
  c.topology_json = R"({"name":"calibrated-mpi2","nodes":[],"links":[]})";
  c.checked = true;
  c.median_error_before = 0.5;
  c.worst_error_before = 0.9;
  c.median_error_after = 0.05;
  c.worst_error_after = 0.125;
  c.check_json = R"([{"schedule":"ring over all","size_bytes":4096}])";
  c.options_json = R"({"iters":3})";
  const Id first = store_.record_calibration(c);
  c.checked = false;
  c.host = "node7";
  const Id second = store_.record_calibration(c);  // the same topology: stored once
  const auto found = store_.calibrations();
  ASSERT_EQ(found.size(), 2u);
  EXPECT_EQ(found[0].id, second);
  EXPECT_EQ(found[1].id, first);
  EXPECT_EQ(found[0].host, "node7");
  EXPECT_FALSE(found[1].host.empty());  // this machine's name
  EXPECT_FALSE(found[1].created_at.empty());
  EXPECT_EQ(found[1].backend, "mpi");
  EXPECT_EQ(found[1].ranks, 2);
  EXPECT_EQ(found[1].topology_name, "calibrated-mpi2");
  EXPECT_EQ(found[1].topology_json, c.topology_json);
  EXPECT_EQ(found[0].topology_id, found[1].topology_id);
  EXPECT_TRUE(found[1].checked);
  EXPECT_FALSE(found[0].checked);
  EXPECT_DOUBLE_EQ(found[1].median_error_before, 0.5);
  EXPECT_DOUBLE_EQ(found[1].worst_error_before, 0.9);
  EXPECT_DOUBLE_EQ(found[1].median_error_after, 0.05);
  EXPECT_DOUBLE_EQ(found[1].worst_error_after, 0.125);
  EXPECT_EQ(found[1].check_json, c.check_json);
  EXPECT_EQ(found[1].options_json, c.options_json);
  EXPECT_EQ(Raw(db_.path()).count("topologies"), 2);  // ring4 of the fixture, and this one
}

TEST_F(StoreTest, ModelCallsAreAReplayCacheAndSumUpPerRun) {
  ModelCall call;
  call.run_id = run_;
  call.model = "m";
  call.request_hash = "aaaa";
  call.error = "HTTP 500";
  store_.record_model_call(call);  // a failure never answers from the cache
  EXPECT_FALSE(store_.cached_model_call("aaaa"));
  call.error.clear();
  call.text_stored = false;  // nor does a call stored as hashes only
  store_.record_model_call(call);
  EXPECT_FALSE(store_.cached_model_call("aaaa"));
  call.text_stored = true;
  call.response = "first";
  call.prompt_tokens = 100;
  call.completion_tokens = 40;
  call.cost = 0.5;
  const Id answered = store_.record_model_call(call);
  call.response = "second";
  store_.record_model_call(call);
  ASSERT_TRUE(store_.cached_model_call("aaaa"));
  EXPECT_EQ(store_.cached_model_call("aaaa")->id, answered);
  EXPECT_EQ(store_.cached_model_call("aaaa")->response, "first");
  call.cached = true;  // a replayed call costs nothing
  store_.record_model_call(call);

  const ModelCallTotals totals = store_.model_call_totals(run_);
  EXPECT_EQ(totals.calls, 5);
  EXPECT_EQ(totals.cached, 1);
  EXPECT_EQ(totals.failed, 1);
  EXPECT_EQ(totals.prompt_tokens, 200);
  EXPECT_EQ(totals.completion_tokens, 80);
  EXPECT_DOUBLE_EQ(totals.cost, 1.0);
}

TEST_F(StoreTest, RunsAndBestFilterByTopologyCollectiveOriginAndDate) {
  const Id other_topo = store_.put_topology("mesh", R"({"name":"mesh"})");
  const Id january = begin(topo_, "allgather", "2026-01-10T09:00:00.000Z");
  const Id march = begin(topo_, "allgather", "2026-03-01T09:00:00.000Z");
  const Id scatter = begin(topo_, "reducescatter", "2026-03-02T09:00:00.000Z");
  const Id mesh = begin(other_topo, "allgather", "2026-03-03T09:00:00.000Z");

  store_.record_candidate(compiled_candidate(january, 0, "jan", 1.0));
  store_.record_candidate(
      compiled_candidate(january, 1, "jan-tie", 1.0));  // ties go to the earliest
  CandidateRecord fast = compiled_candidate(march, 0, "march-llm", 0.5);
  fast.origin = "llm";
  fast.sims.erase(fast.sims.begin());  // only the large size
  store_.record_candidate(fast);
  CandidateRecord rs = compiled_candidate(scatter, 0, "scatter", 0.1);
  rs.collective = "reducescatter";
  store_.record_candidate(rs);
  store_.record_candidate(compiled_candidate(mesh, 0, "mesh", 0.1));

  const Id jan_program = store_.candidates(january)[0].program_id;
  const Id march_program = store_.candidates(march)[0].program_id;
  HistoryFilter ring_ag{"ring4", "allgather", "", "", 0};
  const auto best = store_.best(ring_ag);
  ASSERT_EQ(best.size(), 2u);
  EXPECT_EQ(best[0].size_bytes, kSmall);
  EXPECT_EQ(best[0].run_id, january);
  EXPECT_EQ(best[0].program_id, jan_program);
  EXPECT_DOUBLE_EQ(best[0].perf.time_us, 10);
  EXPECT_EQ(best[1].size_bytes, kLarge);
  EXPECT_EQ(best[1].run_id, march);
  EXPECT_EQ(best[1].program_id, march_program);
  EXPECT_DOUBLE_EQ(best[1].perf.time_us, 50);
  EXPECT_EQ(best[1].schedule_hash, content_hash(schedule_of("march-llm")));

  HistoryFilter offline = ring_ag;
  offline.origin = "offline";
  const auto best_offline = store_.best(offline);
  ASSERT_EQ(best_offline.size(), 2u);
  EXPECT_EQ(best_offline[1].run_id, january);

  HistoryFilter since = ring_ag;
  since.since = "2026-02-01";
  const auto best_since = store_.best(since);
  ASSERT_EQ(best_since.size(), 1u);
  EXPECT_EQ(best_since[0].run_id, march);

  EXPECT_EQ(store_.best({"mesh", "", "", "", 0}).at(0).run_id, mesh);
  EXPECT_EQ(store_.best({"", "reducescatter", "", "", 0}).at(0).run_id, scatter);
  EXPECT_TRUE(store_.best(ring_ag, "flow").empty());
  EXPECT_TRUE(store_.best({"nowhere", "", "", "", 0}).empty());

  EXPECT_EQ(store_.runs().size(), 5u);
  const auto since_runs = store_.runs({"ring4", "", "", "2026-02-01", 0});
  ASSERT_GE(since_runs.size(), 2u);  // march, scatter, and the fixture's run if now is later
  EXPECT_EQ(since_runs[0].id, march);
  EXPECT_EQ(since_runs[1].id, scatter);
  EXPECT_EQ(store_.runs({"ring4", "allgather", "", "2026-01-01", 0}).at(0).id, january);
  const auto llm_runs = store_.runs({"", "", "llm", "", 0});
  ASSERT_EQ(llm_runs.size(), 1u);
  EXPECT_EQ(llm_runs[0].id, march);
  EXPECT_EQ(store_.runs({"", "", "", "", mesh}).at(0).topology_name, "mesh");
}

TEST_F(StoreTest, ReaderOpensAndReadsWhileAnotherConnectionHoldsTheWriteLock) {
  store_.record_candidate(compiled_candidate(run_, 0, "committed"));
  Raw writer(db_.path());
  writer.exec("BEGIN IMMEDIATE");
  writer.exec("UPDATE runs SET status = 'failed'");

  const auto started = std::chrono::steady_clock::now();
  Store reader = Store::open(db_.path());
  EXPECT_EQ(reader.run(run_)->status, "running");  // the uncommitted change is not seen
  EXPECT_EQ(reader.candidates(run_).size(), 1u);
  EXPECT_LT(std::chrono::steady_clock::now() - started, 1s);  // nobody waited for the lock

  writer.exec("COMMIT");
  EXPECT_EQ(reader.run(run_)->status, "failed");
}

TEST_F(StoreTest, ReaderThreadSeesWholeCandidatesWhileAWriterThreadRecords) {
  constexpr std::int64_t kCount = 150;
  std::atomic<bool> done{false};
  std::string writer_error;
  std::thread writer([&] {
    try {
      Store own = Store::open(db_.path());
      for (std::int64_t seq = 0; seq < kCount; ++seq)
        own.record_candidate(compiled_candidate(run_, seq, numbered_source(seq)));
    } catch (const std::exception& e) {
      writer_error = e.what();
    }
    done = true;
  });
  Store reader = Store::open(db_.path());
  std::size_t last = 0;
  int reads = 0;
  bool whole = true;
  while ((!done || reads == 0) && whole) {
    const auto seen = reader.candidates(run_);
    whole = seen.size() >= last;
    last = seen.size();
    for (std::size_t i = 0; i < seen.size(); ++i)
      whole = whole && seen[i].seq == static_cast<std::int64_t>(i) && seen[i].sims.size() == 2u;
    ++reads;
  }
  writer.join();
  EXPECT_TRUE(whole) << "a read saw a partial or shrinking set of candidates";
  EXPECT_EQ(writer_error, "");
  EXPECT_EQ(reader.candidates(run_).size(), static_cast<std::size_t>(kCount));
}

TEST(StoreCrash, AWriterKilledAnywhereLeavesOnlyWholeCandidates) {
  TempDb db;
  Id run = 0;
  {
    Store store = Store::open(db.path());
    RunInfo info;
    info.topology_id = store.put_topology("ring4", "{}");
    info.collective = "allgather";
    info.sizes = {kSmall, kLarge};
    info.proposer = "offline";
    run = store.begin_run(info);
  }
  const pid_t child = fork();
  ASSERT_GE(child, 0);
  if (child == 0) {  // records until killed; never returns into the test runner
    int code = 0;
    try {
      Store store = Store::open(db.path());
      for (std::int64_t seq = 0; seq < 1'000'000; ++seq)
        store.record_candidate(compiled_candidate(run, seq, numbered_source(seq)));
    } catch (...) {
      code = 3;
    }
    _exit(code);
  }
  {
    Store watcher = Store::open(db.path());
    const auto deadline = std::chrono::steady_clock::now() + 20s;
    while (watcher.run_stats(run).candidates < 40 && std::chrono::steady_clock::now() < deadline)
      std::this_thread::sleep_for(1ms);
  }
  ::kill(child, SIGKILL);
  int status = 0;
  ASSERT_EQ(::waitpid(child, &status, 0), child);
  ASSERT_TRUE(WIFSIGNALED(status)) << "the child ended by itself, status " << status;

  Raw raw(db.path());
  EXPECT_EQ(raw.text("PRAGMA integrity_check"), "ok");
  EXPECT_EQ(raw.text("PRAGMA foreign_key_check"), "");
  Store store = Store::open(db.path());
  const auto stored = store.candidates(run);
  const auto committed = static_cast<std::int64_t>(stored.size());
  ASSERT_GE(committed, 40);
  for (std::int64_t seq = 0; seq < committed; ++seq) {
    const StoredCandidate& c = stored[static_cast<std::size_t>(seq)];
    ASSERT_EQ(c.seq, seq);
    EXPECT_EQ(c.program_source, numbered_source(seq));
    EXPECT_TRUE(c.compiled);
    EXPECT_EQ(c.schedule_hash, content_hash(schedule_of(numbered_source(seq))));
    EXPECT_EQ(c.sims.size(), 2u);
  }
  EXPECT_EQ(raw.count("programs"), committed);  // the interrupted candidate left nothing behind
  EXPECT_EQ(raw.count("schedules"), committed);
  EXPECT_EQ(raw.count("compilations"), committed);
  EXPECT_EQ(raw.count("simulations"), 2 * committed);

  // --resume: the next seq goes in, a committed one is refused.
  store.record_candidate(compiled_candidate(run, committed, numbered_source(committed)));
  EXPECT_THROW(store.record_candidate(
                   compiled_candidate(run, committed - 1, numbered_source(committed - 1))),
               DbError);
  EXPECT_EQ(store.run_stats(run).candidates, committed + 1);
}

}  // namespace
}  // namespace optiflow::db
