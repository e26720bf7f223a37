// End-to-end: `optiflow explore` and `optiflow history` on a real SQLite file, including a
// run killed with SIGKILL and resumed.
#include <gtest/gtest.h>
#include <signal.h>
#include <spawn.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <thread>

#include "e2e_support.hpp"
#include "optiflow/db/store.hpp"

extern char** environ;

namespace {

namespace fs = std::filesystem;

using optiflow::e2e::comparable_results;
using optiflow::e2e::slurp;

class Explore : public ::testing::Test {
 protected:
  void SetUp() override {
    dir_ = fs::temp_directory_path() /
           ("optiflow-explore-" + std::to_string(::getpid()) + "-" +
            ::testing::UnitTest::GetInstance()->current_test_info()->name());
    fs::remove_all(dir_);
    fs::create_directories(dir_);
  }
  void TearDown() override { fs::remove_all(dir_); }

  int run(const std::string& args, std::string* out = nullptr) const {
    return optiflow::e2e::run_optiflow(dir_, args, out);
  }

  std::string explore_args(const fs::path& db) const {
    return "explore --topo a100x2 --sizes 1K:1M --budget 80 --seed 7 --threads 2 --db '" +
           db.string() + "' --out '" + (dir_ / "out-dir").string() + "'";
  }

  fs::path dir_;
};

TEST_F(Explore, RunsStoresAndAnswersHistoryQueries) {
  const fs::path db = dir_ / "a.db";
  std::string out;
  ASSERT_EQ(run(explore_args(db), &out), 0) << slurp(dir_ / "err");
  EXPECT_NE(out.find("explore allgather on a100x2: 80 candidates"), std::string::npos) << out;
  EXPECT_TRUE(fs::exists(dir_ / "out-dir" / "allgather-a100x2-1048576.json"));
  EXPECT_TRUE(fs::exists(dir_ / "out-dir" / "allgather-a100x2-1048576.xml"));
  ASSERT_EQ(run("check '" + (dir_ / "out-dir" / "allgather-a100x2-1024.xml").string() + "'"), 0);

  ASSERT_EQ(run("history --db '" + db.string() + "' runs", &out), 0);
  EXPECT_NE(out.find("a100x2"), std::string::npos);
  EXPECT_NE(out.find("finished"), std::string::npos);
  ASSERT_EQ(run("history --db '" + db.string() + "' run 1", &out), 0);
  EXPECT_NE(out.find("progress"), std::string::npos);
  ASSERT_EQ(run("history --db '" + db.string() + "' best --topo a100x2 --size 1M", &out), 0);
  EXPECT_NE(out.find("1M"), std::string::npos) << out;
  ASSERT_EQ(run("history --db '" + db.string() + "' program 1", &out), 0);
  EXPECT_NE(out.find("lineage"), std::string::npos);
  ASSERT_EQ(run("history --db '" + db.string() + "' export --format json", &out), 0);
  EXPECT_EQ(out.front(), '[');
}

TEST_F(Explore, SameSeedStoresIdenticalResults) {
  std::string first, second;
  ASSERT_EQ(run(explore_args(dir_ / "a.db")), 0) << slurp(dir_ / "err");
  ASSERT_EQ(run(explore_args(dir_ / "b.db")), 0) << slurp(dir_ / "err");
  ASSERT_EQ(run("history --db '" + (dir_ / "a.db").string() + "' export", &first), 0);
  ASSERT_EQ(run("history --db '" + (dir_ / "b.db").string() + "' export", &second), 0);
  EXPECT_GT(first.size(), 1000u);
  EXPECT_EQ(comparable_results(first), comparable_results(second));
}

TEST_F(Explore, KilledRunResumesWithoutLosingOrDuplicating) {
  const fs::path killed = dir_ / "killed.db", whole = dir_ / "whole.db";
  // Start a run, let it commit some candidates, then kill it without warning.
  const std::string command =
      std::string("exec '") + OPTIFLOW_BINARY + "' " + explore_args(killed) + " >/dev/null 2>&1";
  pid_t pid = 0;
  const char* argv[] = {"sh", "-c", command.c_str(), nullptr};
  ASSERT_EQ(posix_spawn(&pid, "/bin/sh", nullptr, nullptr, const_cast<char**>(argv), environ), 0);
  std::int64_t committed = 0;
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(60);
  while (committed < 20 && std::chrono::steady_clock::now() < deadline) {
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
    if (!fs::exists(killed)) continue;
    try {
      const auto store = optiflow::db::Store::open(killed.string());
      if (store.run(1)) committed = store.run_stats(1).candidates;
    } catch (const optiflow::db::DbError&) {
    }
  }
  ::kill(pid, SIGKILL);
  int status = 0;
  ::waitpid(pid, &status, 0);
  ASSERT_GE(committed, 20) << "the run never committed 20 candidates";
  {
    const auto store = optiflow::db::Store::open(killed.string());
    const auto stats = store.run_stats(1);
    ASSERT_LT(stats.candidates, 80) << "the run finished before it could be killed";
    const auto candidates = store.candidates(1);
    for (std::size_t i = 0; i < candidates.size(); ++i)
      EXPECT_EQ(candidates[i].seq, static_cast<std::int64_t>(i));
  }

  ASSERT_EQ(run("explore --resume 1 --db '" + killed.string() + "' --out '" +
                (dir_ / "out-dir").string() + "'"),
            0)
      << slurp(dir_ / "err");
  ASSERT_EQ(run(explore_args(whole)), 0) << slurp(dir_ / "err");
  std::string resumed_csv, whole_csv;
  ASSERT_EQ(run("history --db '" + killed.string() + "' export", &resumed_csv), 0);
  ASSERT_EQ(run("history --db '" + whole.string() + "' export", &whole_csv), 0);
  EXPECT_EQ(comparable_results(resumed_csv), comparable_results(whole_csv));
  const auto store = optiflow::db::Store::open(killed.string());
  EXPECT_EQ(store.run_stats(1).candidates, 80);
  EXPECT_EQ(store.run(1)->status, "finished");
}

// The baselines' schedules hold the sizes no program beats: one candidate ("ring over all",
// one ring through the NICs) does not beat NCCL's rings at 1 GiB, so NCCL's ring holds it and
// its schedule is what the run writes there. Without a floor, the program does.
TEST_F(Explore, BaselinesHoldTheSizesNoProgramBeats) {
  const std::string args = "explore --topo a100x2 --sizes 1G --budget 1 --threads 2 --db '" +
                           (dir_ / "f.db").string() + "' --out '" + (dir_ / "winners").string() +
                           "'";
  std::string out;
  ASSERT_EQ(run(args + " --floor nccl", &out), 0) << slurp(dir_ / "err");
  EXPECT_NE(out.find("baseline nccl (no program beat it here)"), std::string::npos) << out;
  std::string schedule = slurp(dir_ / "winners" / "allgather-a100x2-1073741824.json");
  EXPECT_NE(schedule.find("nccl"), std::string::npos) << schedule.substr(0, 200);
  ASSERT_EQ(run("check '" + (dir_ / "winners" / "allgather-a100x2-1073741824.json").string() + "'"),
            0);

  ASSERT_EQ(run(args + " --floor none", &out), 0) << slurp(dir_ / "err");
  EXPECT_EQ(out.find("baseline"), std::string::npos) << out;
  EXPECT_NE(out.find("#1 ring over all"), std::string::npos) << out;

  EXPECT_EQ(run(args + " --floor nccl,gossip"), 2);
  EXPECT_NE(slurp(dir_ / "err").find("no baseline named 'gossip'"), std::string::npos)
      << slurp(dir_ / "err");
}

// TACCL joins the floor with the instances its evaluation sweeps: by default on up to 8 GPUs
// (dgx1: at 64K one template does not beat TACCL with several instances, whose schedule the
// run then writes), not on more (a100x2), and up to 64 GPUs when `--floor` names it. Over 64
// GPUs the run leaves TACCL out and says why.
TEST_F(Explore, TacclJoinsTheFloorWithItsInstances) {
  const std::string db = " --db '" + (dir_ / "t.db").string() + "'";
  std::string out;
  ASSERT_EQ(run("explore --topo dgx1 --sizes 64K --budget 1 --threads 2 --out '" +
                    (dir_ / "dgx1").string() + "'" + db,
                &out),
            0)
      << slurp(dir_ / "err");
  EXPECT_NE(out.find("baseline taccl, 8 instances (no program beat it here)"), std::string::npos)
      << out;
  ASSERT_EQ(run("check '" + (dir_ / "dgx1" / "allgather-dgx1-65536.json").string() + "'"), 0);

  ASSERT_EQ(run("explore --topo a100x2 --sizes 64K --budget 1 --threads 2 --out '" +
                    (dir_ / "a100x2").string() + "'" + db,
                &out),
            0)
      << slurp(dir_ / "err");
  EXPECT_EQ(out.find("taccl"), std::string::npos) << out;

  ASSERT_EQ(run("explore --topo a100x16 --sizes 1G --budget 1 --threads 2 --out '" +
                    (dir_ / "big").string() + "'" + db + " --floor nccl,forestcoll,taccl",
                &out),
            0)
      << slurp(dir_ / "err");
  EXPECT_NE(out.find("not in the floor: taccl: left out over 64 GPUs"), std::string::npos) << out;
}

TEST_F(Explore, BadOptionsFailCleanly) {
  EXPECT_EQ(
      run("explore --topo no-such-topology --budget 1 --db '" + (dir_ / "c.db").string() + "'"), 2);
  EXPECT_EQ(run("explore --resume 42 --db '" + (dir_ / "c.db").string() + "'"), 2);
  EXPECT_EQ(optiflow::e2e::slurp(dir_ / "err"),
            (dir_ / "c.db").string() + ": error: --resume: no run 42 in this database\n");
  EXPECT_EQ(run("history --db '" + (dir_ / "missing.db").string() + "' runs"), 2);
}

}  // namespace
