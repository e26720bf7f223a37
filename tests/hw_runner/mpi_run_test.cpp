// `optiflow run --backend mpi` as CI runs it: real mpirun jobs of 8 (or 4) CPU ranks on this
// machine, small sizes so that each job takes a few seconds on 2 cores. Skipped where mpirun
// is missing.
#include <gtest/gtest.h>
#include <sqlite3.h>

#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>
#include <sstream>
#include <string>

#include "../e2e/e2e_support.hpp"

namespace optiflow::hw_runner {
namespace {

namespace fs = std::filesystem;
using e2e::slurp;

// Under the asan preset, the ranks must not report what the MPI library keeps until exit: its
// plugins are unloaded before LeakSanitizer runs, so their leaks have no module a suppression
// could name. The ranks keep ASan's other checks; leak checking stays on everywhere else.
int run_optiflow(const fs::path& dir, const std::string& args, std::string* out = nullptr,
                 const std::string& more_env = "") {
  const std::string env = more_env +
                          " LSAN_OPTIONS='suppressions=" + std::string(OPTIFLOW_SOURCE_DIR) +
                          "/tests/hw_runner/lsan.supp:print_suppressions=0' "
                          "ASAN_OPTIONS='detect_leaks=0:abort_on_error=1'";
  return e2e::run_optiflow(dir, args, out, env);
}

bool have_mpirun() {
  return std::system("command -v mpirun >/dev/null 2>&1") == 0;
}

class MpiRunTest : public ::testing::Test {
 protected:
  void SetUp() override {
    if (!have_mpirun()) GTEST_SKIP() << "mpirun not found (install openmpi-bin)";
    dir_ = fs::temp_directory_path() /
           ("optiflow_mpi_" + std::to_string(::testing::UnitTest::GetInstance()->random_seed()) +
            "_" + ::testing::UnitTest::GetInstance()->current_test_info()->name());
    fs::remove_all(dir_);
    fs::create_directories(dir_);
  }
  void TearDown() override { fs::remove_all(dir_); }

  std::string program(const std::string& name) const {
    return "'" + std::string(OPTIFLOW_SOURCE_DIR) + "/datasets/programs/" + name + "'";
  }
  std::string path(const std::string& name) const { return "'" + (dir_ / name).string() + "'"; }
  std::string err() const { return slurp(dir_ / "err"); }

  /// Rows of hw_results in this test's database (0 when it does not exist).
  int stored_rows() const { return count("SELECT count(*) FROM hw_results"); }

  /// The one integer `query` gives on this test's database (0 when it does not exist).
  int count(const std::string& query) const {
    if (!fs::exists(dir_ / "run.db")) return 0;
    sqlite3* db = nullptr;
    sqlite3_open((dir_ / "run.db").string().c_str(), &db);
    sqlite3_stmt* statement = nullptr;
    int rows = -1;
    if (sqlite3_prepare_v2(db, query.c_str(), -1, &statement, nullptr) == SQLITE_OK &&
        sqlite3_step(statement) == SQLITE_ROW)
      rows = sqlite3_column_int(statement, 0);
    sqlite3_finalize(statement);
    sqlite3_close(db);
    return rows;
  }

  /// A compiled ring All-Gather for ring8 whose first receive writes one chunk further on.
  std::string misplaced_schedule() {
    EXPECT_EQ(run_optiflow(
                  dir_, "compile " + program("ring.ofl") + " --topo ring8 -o " + path("ring.json")),
              0)
        << err();
    nlohmann::json s = nlohmann::json::parse(slurp(dir_ / "ring.json"));
    for (auto& tb : s["programs"][1]["tbs"])
      for (auto& step : tb["steps"])
        if (step["type"] == "r" || step["type"] == "rcs") {
          step["dst_off"] = (step["dst_off"].get<int>() + 1) % s["chunks"].get<int>();
          std::ofstream(dir_ / "misplaced.json") << s.dump(1);
          return path("misplaced.json");
        }
    ADD_FAILURE() << "no receive in the compiled ring";
    return {};
  }

  fs::path dir_;
};

const std::string kQuick = " --sizes 4K,64K --warmup 1 --iters 3 --timeout 20";

TEST_F(MpiRunTest, CompiledAllGatherRunsOnEightRanksBesideMpiAllgather) {
  std::string out;
  const int status = run_optiflow(dir_,
                                  "run " + program("ring.ofl") + " --topo ring8 --backend mpi " +
                                      "--np 8 --db " + path("run.db") + kQuick,
                                  &out);
  ASSERT_EQ(status, 0) << out << err();
  EXPECT_NE(out.find("on 8 ranks, backend mpi"), std::string::npos) << out;
  EXPECT_NE(out.find("MPI_Allgather"), std::string::npos) << out;
  EXPECT_NE(out.find("busbw"), std::string::npos) << out;
  // Each row: size, count, then time, algbw, busbw and #wrong (0) for schedule and native.
  for (const std::string size : {"4K", "64K"}) {
    const auto row = out.find("\n" + std::string(10 - size.size(), ' ') + size + " ");
    ASSERT_NE(row, std::string::npos) << out;
    std::istringstream cells(out.substr(row + 1, out.find('\n', row + 1) - row - 1));
    std::string name;
    std::uint64_t count = 0, wrong = 1, native_wrong = 1;
    double time_us = 0, algbw = 0, busbw = 0, native_time = 0, native_algbw = 0, native_busbw = 0;
    cells >> name >> count >> time_us >> algbw >> busbw >> wrong >> native_time >> native_algbw >>
        native_busbw >> native_wrong;
    ASSERT_FALSE(cells.fail()) << out;
    EXPECT_EQ(wrong, 0u);
    EXPECT_EQ(native_wrong, 0u);
    EXPECT_GT(busbw, 0);
    EXPECT_GT(native_busbw, 0);
    EXPECT_NEAR(busbw, algbw * 7 / 8, 2e-3 * algbw);  // both printed to 4 significant digits
  }
  EXPECT_EQ(stored_rows(), 2);
}

TEST_F(MpiRunTest, ReduceScatterAndAllReduceRunOnFourRanks) {
  for (const std::string collective : {"reducescatter", "allreduce"}) {
    std::string out;
    const int status = run_optiflow(dir_,
                                    "run " + program("ring.ofl") + " --topo ring4 --collective " +
                                        collective + " --no-store" + kQuick,
                                    &out);
    ASSERT_EQ(status, 0) << collective << "\n" << out << err();
    EXPECT_NE(out.find(collective == "allreduce" ? "MPI_Allreduce" : "MPI_Reduce_scatter_block"),
              std::string::npos)
        << out;
  }
}

// The native column can run the schedule's own algorithm, so that the executor and Open MPI
// are compared on one algorithm; a name Open MPI does not have fails before launching.
TEST_F(MpiRunTest, TheNativeColumnRunsTheAlgorithmAskedFor) {
  std::string out;
  ASSERT_EQ(
      run_optiflow(dir_,
                   "run " + program("ring.ofl") +
                       " --topo ring4 --native-algorithm recursive-doubling --no-store" + kQuick,
                   &out),
      0)
      << out << err();
  EXPECT_NE(out.find("MPI_Allgather (recursive-doubling)"), std::string::npos) << out;
  EXPECT_NE(run_optiflow(dir_, "run " + program("ring.ofl") +
                                   " --topo ring4 --native-algorithm hypercube --no-store"),
            0);
  EXPECT_NE(err().find("--native-algorithm: Open MPI has no MPI_Allgather algorithm 'hypercube' "
                       "(linear | bruck | recursive_doubling | ring | neighbor | two_proc)"),
            std::string::npos)
      << err();
}

TEST_F(MpiRunTest, ChunkWrittenToTheWrongPlaceIsWrongDataAndFails) {
  const std::string schedule = misplaced_schedule();
  // The static verifier catches it first...
  EXPECT_NE(run_optiflow(dir_, "run " + schedule + " --topo ring8 --db " + path("run.db") + kQuick),
            0);
  EXPECT_NE(err().find("verification failed"), std::string::npos) << err();
  // ...and without it, the runner's own data check does, and nothing is stored.
  std::string out;
  const int status = run_optiflow(
      dir_, "run " + schedule + " --topo ring8 --no-verify --db " + path("run.db") + kQuick, &out);
  EXPECT_NE(status, 0) << out;
  EXPECT_NE(err().find("wrong data"), std::string::npos) << out << err();
  EXPECT_EQ(stored_rows(), 0);
}

TEST_F(MpiRunTest, HungRankTimesOutNamingTheStepItsPeerWaitsOn) {
  const auto start = std::chrono::steady_clock::now();
  std::string out;
  const int status = run_optiflow(dir_,
                                  "run " + program("ring.ofl") + " --topo ring8 --no-store " +
                                      "--sizes 4K --timeout 1.5 --inject-hang 3",
                                  &out);
  const std::chrono::duration<double> took = std::chrono::steady_clock::now() - start;
  EXPECT_NE(status, 0);
  const std::string text = err();
  // Seconds as given, in the one form of every timeout message of the runner.
  EXPECT_NE(text.find("timed out after 1.5 s in the checked execution at 4K"), std::string::npos)
      << out << text;
  EXPECT_NE(text.find("waits for"), std::string::npos) << text;
  // The message names the rank that gave up, its host, and the step it waits on.
  EXPECT_NE(text.find(" (host "), std::string::npos) << text;
  EXPECT_NE(text.find(" step "), std::string::npos) << text;
  EXPECT_LT(took.count(), 60);
}

TEST_F(MpiRunTest, CrashedRankIsReportedWithItsRank) {
  std::string out;
  const int status = run_optiflow(dir_,
                                  "run " + program("ring.ofl") + " --topo ring4 --no-store " +
                                      "--sizes 4K --timeout 5 --inject-crash 2",
                                  &out);
  EXPECT_NE(status, 0);
  EXPECT_NE((out + err()).find("rank 2"), std::string::npos) << out << err();
  EXPECT_NE(err().find("the job failed"), std::string::npos) << err();
}

// The one-rank schedule and topology of scripts/gpu-smoke.sh: a local copy, one GPU.
void write_one_rank_files(const fs::path& dir) {
  std::ofstream(dir / "one.json")
      << R"({"name": "one", "nodes": [{"id": "g0", "kind": "gpu", "rank": 0, "host": 0,
            "local": 0}], "links": []})";
  std::ofstream(dir / "one-allgather.json")
      << R"({"format": "optiflow-schedule", "version": 1, "name": "one-allgather",
            "collective": "allgather", "ranks": 1, "chunks": 2, "protocol": "Simple",
            "inplace": false, "topology": "",
            "programs": [{"rank": 0, "input_chunks": 2, "output_chunks": 2, "scratch_chunks": 0,
              "tbs": [{"send": -1, "recv": -1, "channel": 0, "steps": [
                {"type": "cpy", "src": "i", "src_off": 0, "dst": "o", "dst_off": 0,
                 "count": 2}]}]}]})";
}

TEST_F(MpiRunTest, OneRankScheduleOfTheGpuSmokeTestRunsOnMpi) {
  write_one_rank_files(dir_);
  std::string out;
  ASSERT_EQ(run_optiflow(dir_,
                         "run " + path("one-allgather.json") + " --topo " + path("one.json") +
                             " --np 1 --no-store" + kQuick,
                         &out),
            0)
      << out << err();
  EXPECT_NE(out.find("on 1 ranks"), std::string::npos) << out;
}

TEST_F(MpiRunTest, NcclBackendRunsOrSkipsCleanlyWithoutAGpu) {
  write_one_rank_files(dir_);
  std::string out;
  const int status =
      run_optiflow(dir_,
                   "run " + path("one-allgather.json") + " --topo " + path("one.json") +
                       " --backend nccl --np 1 --no-store" + kQuick,
                   &out);
  if (err().find("built without CUDA and NCCL") != std::string::npos)
    GTEST_SKIP() << "this build has no NCCL backend";
  if (status == 77) {
    EXPECT_NE(err().find("skipped: no GPU"), std::string::npos) << err();
    GTEST_SKIP() << "no GPU here: " << err().substr(0, err().find('\n'));
  }
  ASSERT_EQ(status, 0) << out << err();
  EXPECT_NE(out.find("ncclAllGather"), std::string::npos) << out;
}

TEST_F(MpiRunTest, CalibrationFitsEveryPairAndReportsTheSimulatorsErrorBeforeAndAfter) {
  std::string out;
  ASSERT_EQ(run_optiflow(dir_,
                         "calibrate --backend mpi --np 2 --sizes 1K,64K --iters 3 " +
                             std::string("--check-sizes 4K -o ") + path("cal.json") + " --db " +
                             path("run.db"),
                         &out),
            0)
      << out << err();
  EXPECT_NE(out.find("0<->1"), std::string::npos) << out;
  EXPECT_NE(out.find("|error| before: median"), std::string::npos) << out;
  EXPECT_NE(out.find("; after: median"), std::string::npos) << out;
  const auto topo = nlohmann::json::parse(slurp(dir_ / "cal.json"));
  // 0->1 and 1->0, measured by one ping-pong: written as one bidirectional link.
  ASSERT_EQ(topo.at("links").size(), 1u);
  EXPECT_TRUE(topo.at("links").at(0).value("bidirectional", false));
  EXPECT_GT(topo.at("links").at(0).at("bw_GBps").get<double>(), 0);
  // Stored, with its check: 3 schedules (ring, direct, rd) at one size.
  EXPECT_NE(out.find("stored as calibration 1"), std::string::npos) << out;
  EXPECT_EQ(count("SELECT count(*) FROM calibrations WHERE backend = 'mpi' AND ranks = 2 AND "
                  "checked = 1 AND json_array_length(check_json) = 3 AND worst_error_after >= "
                  "median_error_after"),
            1);
  ASSERT_EQ(run_optiflow(dir_, "history --db " + path("run.db") + " calibrations", &out), 0)
      << err();
  EXPECT_NE(out.find("calibrated-mpi2"), std::string::npos) << out;
  EXPECT_NE(out.find("%"), std::string::npos) << out;

  // Its runs are stored, so that the machine can be fitted to them later and the fit checked.
  EXPECT_EQ(count("SELECT count(*) FROM hw_results WHERE backend = 'mpi' AND size_bytes = 4096"),
            3);
  ASSERT_EQ(run_optiflow(
                dir_, "calibrate --from-db " + path("run.db") + " --ranks 2 -o " + path("fit.json"),
                &out),
            0)
      << out << err();
  EXPECT_NE(out.find("fitted on 3 points of 3 schedules"), std::string::npos) << out;
  ASSERT_EQ(run_optiflow(
                dir_, "fidelity --db " + path("run.db") + " --topo " + path("fit.json") + " --json",
                &out),
            0)
      << out << err();
  const auto report = nlohmann::json::parse(out);
  EXPECT_EQ(report.at("points").get<int>(), 3);
  ASSERT_EQ(report.at("by_group").size(), 1u);
  const auto& group = report.at("by_group").at(0);
  EXPECT_EQ(group.at("schedules").get<int>(), 3);
  EXPECT_EQ(group.at("size_bytes").get<int>(), 4096);
  EXPECT_GE(group.at("regret").get<double>(), 1.0);
}

// GPUs on this machine, as `nvidia-smi -L` lists them (0 without the tool).
int gpu_count() {
  FILE* pipe = popen("nvidia-smi -L 2>/dev/null", "r");
  if (pipe == nullptr) return 0;
  int gpus = 0;
  char line[512];
  while (std::fgets(line, sizeof line, pipe) != nullptr)
    if (std::strncmp(line, "GPU ", 4) == 0) ++gpus;
  pclose(pipe);
  return gpus;
}

// Without a GPU the ranks agree to skip: exit 77, "skipped: no GPU", nothing written; with two
// GPUs it calibrates the NCCL links and checks the simulator on NCCL runs.
TEST_F(MpiRunTest, NcclCalibrationRunsOrSkipsCleanlyWithoutAGpu) {
  if (gpu_count() == 1) GTEST_SKIP() << "one GPU here; the NCCL calibration needs two";
  std::string out;
  const int status = run_optiflow(dir_,
                                  "calibrate --backend nccl --np 2 --sizes 1K,64K --iters 3 " +
                                      std::string("--check-sizes 4K -o ") + path("cal.json") +
                                      " --db " + path("run.db"),
                                  &out);
  if (err().find("built without CUDA and NCCL") != std::string::npos) {
    EXPECT_NE(status, 0);
    GTEST_SKIP() << "this build has no NCCL backend";
  }
  if (status == 77) {
    EXPECT_NE(err().find("skipped: no GPU"), std::string::npos) << err();
    EXPECT_FALSE(fs::exists(dir_ / "cal.json"));
    EXPECT_EQ(count("SELECT count(*) FROM calibrations"), 0);
    GTEST_SKIP() << "no GPU here: " << err().substr(0, err().find('\n'));
  }
  ASSERT_EQ(status, 0) << out << err();
  EXPECT_NE(out.find("0<->1"), std::string::npos) << out;
  EXPECT_NE(out.find("|error| before: median"), std::string::npos) << out;
  const auto topo = nlohmann::json::parse(slurp(dir_ / "cal.json"));
  EXPECT_EQ(topo.at("name"), "calibrated-nccl2");
  ASSERT_EQ(topo.at("links").size(), 1u);
  EXPECT_GT(topo.at("links").at(0).at("bw_GBps").get<double>(), 0);
  EXPECT_EQ(count("SELECT count(*) FROM calibrations WHERE backend = 'nccl' AND checked = 1"), 1);
}

TEST_F(MpiRunTest, CalibrationRefusesAnUnknownBackendBeforeLaunching) {
  EXPECT_NE(run_optiflow(dir_, "calibrate --backend gloo --np 2 --no-store"), 0);
  EXPECT_NE(err().find("unknown backend 'gloo' (mpi or nccl)"), std::string::npos) << err();
}

// explore --hw: each batch's best simulated candidate runs for real; the winners are the
// fastest measured ones, and what was measured is stored beside the candidates.
TEST_F(MpiRunTest, ExploreMeasuresEachBatchsBestCandidateAndPicksMeasuredWinners) {
  std::string out;
  ASSERT_EQ(run_optiflow(dir_,
                         "explore --topo ring4 --budget 32 --sizes 4K,64K --hw mpi --hw-topk 1 "
                         "--hw-iters 3 --db " +
                             path("run.db") + " --out " + path("schedules"),
                         &out),
            0)
      << out << err();
  const auto line = out.find("measured on mpi: ");
  ASSERT_NE(line, std::string::npos) << out;
  std::istringstream summary(out.substr(line + 17));
  int measured = 0;
  summary >> measured;
  // Two batches of 16, one candidate each (the second's best may repeat the first's schedule).
  EXPECT_GE(measured, 1);
  EXPECT_LE(measured, 2);
  EXPECT_NE(out.find("schedules (0 failed)"), std::string::npos) << out;
  EXPECT_EQ(count("SELECT count(DISTINCT schedule_id) FROM hw_results WHERE backend = 'mpi' AND "
                  "schedule_id IN (SELECT schedule_id FROM candidates WHERE run_id = 1)"),
            measured);
  EXPECT_EQ(stored_rows(), 2 * measured);
  // Both sizes' winners are measured: a time in the measured column, not "-".
  EXPECT_NE(out.find("measured  best program"), std::string::npos) << out;
  for (const std::string size : {"4K", "64K"}) {
    const auto row = out.find("\n" + std::string(8 - size.size(), ' ') + size + " ");
    ASSERT_NE(row, std::string::npos) << out;
    const std::string text = out.substr(row + 1, out.find('\n', row + 1) - row - 1);
    EXPECT_NE(text.find(" us  #"), std::string::npos) << text;
  }
  // And how well the pre-screen predicted what was measured.
  EXPECT_NE(out.find("the pre-screen against mpi (" + std::to_string(2 * measured) +
                     " measured points; optiflow fidelity): median |error| "),
            std::string::npos)
      << out;
}

TEST_F(MpiRunTest, ExploreGoesOnWithSimulatedResultsWhenAMeasurementFails) {
  std::string out;
  ASSERT_EQ(run_optiflow(dir_,
                         "explore --topo ring4 --budget 16 --sizes 4K --hw mpi --db " +
                             path("run.db") + " --out " + path("schedules"),
                         &out, "OPTIFLOW_MPIRUN=false"),
            0)
      << out << err();
  EXPECT_NE(err().find("warning: candidate "), std::string::npos) << err();
  EXPECT_NE(err().find("could not be measured on mpi: the job failed"), std::string::npos) << err();
  EXPECT_NE(out.find("measured on mpi: 0 schedules (1 failed)"), std::string::npos) << out;
  EXPECT_EQ(count("SELECT count(*) FROM candidates"), 16);
  EXPECT_EQ(stored_rows(), 0);
  EXPECT_NE(out.find("            -  #"), std::string::npos) << out;  // simulated winners
}

TEST_F(MpiRunTest, WrongRankCountIsRefusedBeforeLaunching) {
  EXPECT_NE(run_optiflow(dir_, "run " + program("ring.ofl") + " --topo ring8 --np 4 --no-store"),
            0);
  EXPECT_NE(err().find("the schedule has 8 ranks, not 4"), std::string::npos) << err();
}

}  // namespace
}  // namespace optiflow::hw_runner
