// The history queries (run list, run detail with progress, best across runs, lineage) and the
// CSV and JSON exports.
#include "optiflow/db/history.hpp"

#include <gtest/gtest.h>
#include <unistd.h>

#include <filesystem>
#include <nlohmann/json.hpp>

#include "optiflow/support/units.hpp"
#include "temp_db.hpp"

namespace optiflow::db {
namespace {

namespace fs = std::filesystem;

constexpr std::uint64_t kSmall = 1024, kLarge = 1 << 20;

using test_support::TempDb;

// One run on "dgx" at 1K and 1M over three iterations:
//   seq 0 it 0  A            1K 10            (1M not simulated)
//   seq 1 it 0  B <- A       does not compile
//   seq 2 it 1  C <- A       1K 12   1M 80
//   seq 3 it 1  D <- C, A    1K  8   1M 90    (llm)
//   seq 4 it 2  E <- D       1K  8   1M 60    (ties D at 1K: D keeps it)
class HistoryTest : public ::testing::Test {
 protected:
  void SetUp() override {
    topo_ = store_.put_topology("dgx", R"({"name":"dgx"})");
    RunInfo info;
    info.topology_id = topo_;
    info.collective = "allgather";
    info.sizes = {kSmall, kLarge};
    info.proposer = "offline";
    info.started_at = "2026-03-05T10:00:00.000Z";
    run_ = store_.begin_run(info);
    info.collective = "reducescatter";
    other_run_ = store_.begin_run(info);

    a_ = record(0, 0, "A", {}, {{kSmall, 10}});
    b_ = record(1, 0, "B", {a_}, {}, false);
    c_ = record(2, 1, "C", {a_}, {{kSmall, 12}, {kLarge, 80}});
    d_ = record(3, 1, "D", {c_, a_}, {{kSmall, 8}, {kLarge, 90}}, true, "llm");
    e_ = record(4, 2, "E", {d_}, {{kSmall, 8}, {kLarge, 60}});
  }

  Id record(std::int64_t seq, std::int64_t iteration, const std::string& source,
            std::vector<Id> parents, const std::vector<std::pair<std::uint64_t, double>>& times,
            bool compiled = true, const std::string& origin = "offline") {
    CandidateRecord r;
    r.run_id = run_;
    r.seq = seq;
    r.iteration = iteration;
    r.program_source = source;
    r.origin = origin;
    r.parent_program_ids = std::move(parents);
    r.collective = "allgather";
    r.compiled = compiled;
    if (compiled) {
      r.schedule_json = "{\"of\":\"" + source + "\"}";
    } else {
      r.diagnostics = "error";
    }
    for (const auto& [size, time_us] : times)
      r.sims.push_back(support::SizeResult{
          size, time_us, support::GBps_of(static_cast<double>(size), time_us), 0, 1});
    store_.record_candidate(r);
    return store_.candidates(run_).back().program_id;
  }

  TempDb db_;
  Store store_ = Store::open(db_.path());
  Id topo_ = 0, run_ = 0, other_run_ = 0;
  Id a_ = 0, b_ = 0, c_ = 0, d_ = 0, e_ = 0;
};

TEST_F(HistoryTest, ListRunsWithTheirCounts) {
  const auto runs = list_runs(store_);
  ASSERT_EQ(runs.size(), 2u);
  EXPECT_EQ(runs[0].run.id, run_);
  EXPECT_EQ(runs[0].stats.candidates, 5);
  EXPECT_EQ(runs[0].stats.compiled, 4);
  EXPECT_EQ(runs[0].stats.last_iteration, 2);
  EXPECT_EQ(runs[1].stats.candidates, 0);
  EXPECT_EQ(runs[1].stats.last_iteration, -1);
  const auto scatter = list_runs(store_, {"", "reducescatter", "", "", 0});
  ASSERT_EQ(scatter.size(), 1u);
  EXPECT_EQ(scatter[0].run.id, other_run_);
  EXPECT_EQ(list_runs(store_, {"", "", "llm", "", 0}).size(), 1u);
  EXPECT_TRUE(list_runs(store_, {"", "", "", "2027-01-01", 0}).empty());
}

TEST_F(HistoryTest, RunDetailHasBestPerSizeAndProgressPerIteration) {
  const std::optional<RunDetail> detail = run_detail(store_, run_);
  ASSERT_TRUE(detail);
  EXPECT_EQ(detail->run.sizes, (std::vector<std::uint64_t>{kSmall, kLarge}));
  EXPECT_EQ(detail->stats.candidates, 5);
  ASSERT_EQ(detail->best.size(), 2u);
  EXPECT_EQ(detail->best[0].size_bytes, kSmall);
  EXPECT_EQ(detail->best[0].program_id, d_);
  EXPECT_DOUBLE_EQ(detail->best[0].perf.time_us, 8);
  EXPECT_EQ(detail->best[1].program_id, e_);
  EXPECT_DOUBLE_EQ(detail->best[1].perf.time_us, 60);
  EXPECT_EQ(detail->best[1].schedule_hash, content_hash("{\"of\":\"E\"}"));

  ASSERT_EQ(detail->progress.size(), 3u);
  const std::vector<std::optional<double>> after0{10.0, std::nullopt}, after1{8.0, 80.0},
      after2{8.0, 60.0};
  EXPECT_EQ(detail->progress[0].iteration, 0);
  EXPECT_EQ(detail->progress[0].candidates, 1);
  EXPECT_EQ(detail->progress[0].best_time_us, after0);
  EXPECT_EQ(detail->progress[1].candidates, 3);
  EXPECT_EQ(detail->progress[1].best_time_us, after1);
  EXPECT_EQ(detail->progress[2].iteration, 2);
  EXPECT_EQ(detail->progress[2].best_time_us, after2);

  // The same answer as the store's best over this one run.
  const auto best = best_across_runs(store_, {"", "", "", "", run_});
  ASSERT_EQ(best.size(), 2u);
  EXPECT_EQ(best[0].program_id, detail->best[0].program_id);
  EXPECT_EQ(best[1].program_id, detail->best[1].program_id);

  const std::optional<RunDetail> flow = run_detail(store_, run_, "flow");
  ASSERT_TRUE(flow);
  EXPECT_TRUE(flow->best.empty());
  EXPECT_TRUE(flow->progress.empty());
  EXPECT_FALSE(run_detail(store_, 12345));
}

TEST_F(HistoryTest, LineageListsEveryAncestorOnceAtItsNearestDepth) {
  const std::optional<ProgramLineage> lineage = program_lineage(store_, e_);
  ASSERT_TRUE(lineage);
  EXPECT_EQ(lineage->program.source, "E");
  ASSERT_EQ(lineage->ancestors.size(), 3u);
  EXPECT_EQ(lineage->ancestors[0].program.id, d_);
  EXPECT_EQ(lineage->ancestors[0].depth, 1);
  EXPECT_EQ(lineage->ancestors[0].program.origin, "llm");
  EXPECT_EQ(lineage->ancestors[1].program.id, c_);
  EXPECT_EQ(lineage->ancestors[1].depth, 2);
  EXPECT_EQ(lineage->ancestors[2].program.id, a_);
  EXPECT_EQ(lineage->ancestors[2].depth, 2);
  ASSERT_EQ(lineage->results.size(), 2u);
  EXPECT_EQ(lineage->results[0].topology, "dgx");
  EXPECT_EQ(lineage->results[0].model, "alpha-beta");
  EXPECT_DOUBLE_EQ(lineage->results[1].perf.time_us, 60);

  const std::optional<ProgramLineage> root = program_lineage(store_, a_);
  ASSERT_TRUE(root);
  EXPECT_TRUE(root->ancestors.empty());
  EXPECT_TRUE(program_lineage(store_, b_)->results.empty());  // never compiled
  EXPECT_FALSE(program_lineage(store_, 999));
}

TEST(HistoryExport, CsvQuotesWhereNeededAndPrintsShortestNumbers) {
  ResultRow row;
  row.run_id = 1;
  row.seq = 2;
  row.iteration = 3;
  row.program_id = 4;
  row.origin = "llm";
  row.topology = "dgx, 8 GPUs";
  row.collective = "allgather";
  row.model = "say \"flow\"";
  row.schedule_hash = "00ff00ff00ff00ff";
  row.recorded_at = "2026-03-05T14:07:31.042Z";
  row.perf = support::SizeResult{1024, 12.5, 0.1, 0.0875, 2};
  EXPECT_EQ(results_csv({row}),
            "run_id,seq,iteration,program_id,origin,topology,collective,model,schedule_hash,size_"
            "bytes,time_us,"
            "algbw_GBps,busbw_GBps,bound_us,recorded_at\n"
            "1,2,3,4,llm,\"dgx, 8 GPUs\",allgather,\"say "
            "\"\"flow\"\"\",00ff00ff00ff00ff,1024,12.5,0.1,0.0875,2,"
            "2026-03-05T14:07:31.042Z\n");
  EXPECT_EQ(results_csv({}).find('\n'), results_csv({}).size() - 1);  // the header alone
}

TEST_F(HistoryTest, ExportsTheResultsOfARunAsCsvAndJson) {
  const std::vector<ResultRow> rows = store_.results({"", "", "", "", run_});
  ASSERT_EQ(rows.size(), 7u);  // A at one size, C, D, E at two
  EXPECT_EQ(rows[0].seq, 0);
  EXPECT_EQ(rows[0].topology, "dgx");
  EXPECT_EQ(rows.back().seq, 4);
  EXPECT_EQ(rows.back().perf.size_bytes, kLarge);

  const std::string csv = results_csv(rows);
  EXPECT_EQ(std::count(csv.begin(), csv.end(), '\n'), 8);
  EXPECT_NE(csv.find("\n" + std::to_string(run_) + ",4,2," + std::to_string(e_) +
                     ",offline,dgx,allgather,alpha-beta,"),
            std::string::npos)
      << csv;

  const nlohmann::json json = nlohmann::json::parse(results_json(rows));
  ASSERT_TRUE(json.is_array());
  ASSERT_EQ(json.size(), 7u);
  const nlohmann::json& last = json.back();
  EXPECT_EQ(last["run_id"], run_);
  EXPECT_EQ(last["seq"], 4);
  EXPECT_EQ(last["program_id"], e_);
  EXPECT_EQ(last["origin"], "offline");
  EXPECT_EQ(last["size_bytes"], kLarge);
  EXPECT_DOUBLE_EQ(last["time_us"].get<double>(), 60);
  EXPECT_EQ(last["schedule_hash"], content_hash("{\"of\":\"E\"}"));
  EXPECT_EQ(json[3]["origin"], "llm");

  EXPECT_EQ(store_.results({"", "", "llm", "", 0}).size(), 2u);
  EXPECT_TRUE(store_.results({"elsewhere", "", "", "", 0}).empty());
}

}  // namespace
}  // namespace optiflow::db
