// End-to-end: `optiflow compare` against stored explorations, baselines and a program file;
// its table, JSON, CSV, plot, and the comparison in the database.
#include <gtest/gtest.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>
#include <sstream>

#include "e2e_support.hpp"
#include "optiflow/db/store.hpp"

namespace {

namespace fs = std::filesystem;
using optiflow::e2e::slurp;

class Compare : public ::testing::Test {
 protected:
  void SetUp() override {
    dir_ = fs::temp_directory_path() /
           ("optiflow-compare-" + std::to_string(::getpid()) + "-" +
            ::testing::UnitTest::GetInstance()->current_test_info()->name());
    fs::remove_all(dir_);
    fs::create_directories(dir_);
    db_ = (dir_ / "a.db").string();
  }
  void TearDown() override { fs::remove_all(dir_); }

  int run(const std::string& args, std::string* out = nullptr) const {
    return optiflow::e2e::run_optiflow(dir_, args, out);
  }
  std::string err() const { return slurp(dir_ / "err"); }

  fs::path dir_;
  std::string db_;
};

TEST_F(Compare, OursAgainstNcclAndAProgramWithTablePlotAndStoredResults) {
  ASSERT_EQ(run("explore --topo a100x2 --sizes 1K:1M --budget 40 --threads 2 --db '" + db_ +
                "' --out '" + (dir_ / "o").string() + "'"),
            0)
      << err();
  std::ofstream(dir_ / "rd.ofl") << "rd over rails\ndirect over hosts\n";
  const std::string args = "compare --topo a100x2 --sizes 1K,64K,1M --db '" + db_ +
                           "' --with ours,nccl,nccl-ring,'" + (dir_ / "rd.ofl").string() + "'";
  std::string out;
  ASSERT_EQ(run(args + " --plot '" + (dir_ / "p.svg").string() + "'", &out), 0) << err();
  for (const char* expected : {"compare allgather on a100x2", "ours", "nccl-ring", "rd.ofl",
                               "x bound", "program #", "plot: "})
    EXPECT_NE(out.find(expected), std::string::npos) << expected << " in\n" << out;

  const std::string svg = slurp(dir_ / "p.svg");
  EXPECT_TRUE(svg.starts_with("<svg")) << svg.substr(0, 100);
  std::size_t lines = 0;
  for (auto at = svg.find("<polyline"); at != std::string::npos; at = svg.find("<polyline", at + 1))
    ++lines;
  // Bandwidth: the bound and four contenders; speed-up over NCCL: NCCL at 1 and four contenders.
  EXPECT_EQ(lines, 5u + 5u);
  EXPECT_NE(svg.find("stroke-dasharray"), std::string::npos);
  EXPECT_NE(svg.find("bus bandwidth (GB/s)"), std::string::npos);
  EXPECT_NE(svg.find("speed-up over NCCL"), std::string::npos);
  EXPECT_NE(svg.find(">64K</text>"), std::string::npos);  // sizes read as sizes

  ASSERT_EQ(run(args + " --json --no-store", &out), 0) << err();
  const auto doc = nlohmann::json::parse(out);
  ASSERT_EQ(doc["contenders"].size(), 4u);
  EXPECT_EQ(doc["contenders"][0]["name"], "ours");
  EXPECT_EQ(doc["contenders"][3]["name"], "rd.ofl");
  for (const auto& contender : doc["contenders"])
    for (const auto& r : contender["results"]) {
      EXPECT_GE(r["x_bound"].get<double>(), 1 - 1e-9) << contender["name"];  // a true bound
      EXPECT_GT(r["vs_nccl"].get<double>(), 0);
    }
  for (const auto& r : doc["contenders"][1]["results"])
    EXPECT_DOUBLE_EQ(r["vs_nccl"].get<double>(), 1.0);  // nccl against itself
  // Ours is the best stored per size, so no worse than the program it was not given.
  for (std::size_t s = 0; s < 3; ++s)
    EXPECT_LE(doc["contenders"][0]["results"][s]["time_us"].get<double>(),
              doc["contenders"][1]["results"][s]["time_us"].get<double>() * (1 + 1e-9));

  ASSERT_EQ(run(args + " --csv --no-store", &out), 0) << err();
  EXPECT_TRUE(out.starts_with("contender,size_bytes,time_us,")) << out;
  EXPECT_EQ(std::count(out.begin(), out.end(), '\n'), 1 + 4 * 3);

  const auto stored = optiflow::db::Store::open(db_).comparisons();
  ASSERT_EQ(stored.size(), 1u);  // --no-store kept the other two out
  EXPECT_EQ(stored[0].topology_name, "a100x2");
  ASSERT_EQ(stored[0].contenders.size(), 4u);
  EXPECT_EQ(stored[0].contenders[2].name, "nccl-ring");
  EXPECT_EQ(stored[0].contenders[2].results.size(), 3u);
  EXPECT_FALSE(stored[0].contenders[3].schedule_hash.empty());
  EXPECT_EQ(stored[0].contenders[1].choices[0], "ring/LL");
  ASSERT_EQ(run("history --db '" + db_ + "' comparisons --topo a100x2", &out), 0) << err();
  EXPECT_NE(out.find("comparison 1: allgather on a100x2"), std::string::npos) << out;
  EXPECT_NE(out.find("nccl-ring"), std::string::npos) << out;
}

TEST_F(Compare, SaysWhatIsMissing) {
  ASSERT_NE(run("compare --topo a100x2 --db '" + db_ + "'"), 0);
  // The library names its option ("with"); the command line names the flag it came from.
  EXPECT_EQ(err().rfind("command line: error: --with: no stored schedules for 'ours' on a100x2", 0),
            0u)
      << err();
  ASSERT_NE(run("compare --topo a100x2 --with nccl,taccl-like --db '" + db_ + "'"), 0);
  EXPECT_NE(err().find("'taccl-like' is neither ours, a baseline"), std::string::npos) << err();
  ASSERT_NE(run("compare --topo a100x2 --with nccl --plot p.pdf --db '" + db_ + "'"), 0);
  EXPECT_NE(err().find("--plot"), std::string::npos) << err();
}

// The plot as PNG, with a synthesizer among the contenders: its solver report in the table.
TEST_F(Compare, WritesAPngPlotAndASynthesizersSolverReport) {
  const std::string png = (dir_ / "p.png").string();
  std::string out;
  ASSERT_EQ(run("compare --topo dgx1 --sizes 1K,1M,1G --with nccl,forestcoll --no-store --plot '" +
                    png + "'",
                &out),
            0)
      << err();
  EXPECT_NE(out.find("CLP"), std::string::npos) << out;
  const std::string bytes = slurp(png);
  ASSERT_GT(bytes.size(), 24u);
  EXPECT_EQ(bytes.substr(0, 8), std::string("\x89PNG\r\n\x1a\n", 8));
  auto be32 = [&](std::size_t at) {
    return (std::uint32_t{static_cast<unsigned char>(bytes[at])} << 24) |
           (std::uint32_t{static_cast<unsigned char>(bytes[at + 1])} << 16) |
           (std::uint32_t{static_cast<unsigned char>(bytes[at + 2])} << 8) |
           std::uint32_t{static_cast<unsigned char>(bytes[at + 3])};
  };
  // The SVG's 860 x 800 (bandwidth and speed-up panels) at two pixels per SVG pixel.
  EXPECT_EQ(be32(16), 1720u);
  EXPECT_EQ(be32(20), 1600u);
}

}  // namespace

// A comparison JSON read back (`--from`): the same JSON and plot as the run that wrote it, so
// a study can assemble contenders from several commands and draw them with ours; a broken file
// is named with its field.
TEST_F(Compare, ReadsBackTheJsonItWrites) {
  const std::string args = "compare --topo dgx1 --sizes 1K,1M,1G --with nccl,nccl-ring --no-store";
  std::string written, again;
  ASSERT_EQ(run(args + " --json --plot '" + (dir_ / "a.svg").string() + "'", &written), 0) << err();
  std::ofstream(dir_ / "c.json") << written;
  const std::string from = "compare --from '" + (dir_ / "c.json").string() + "'";
  ASSERT_EQ(run(from + " --json --plot '" + (dir_ / "b.svg").string() + "'", &again), 0) << err();
  EXPECT_EQ(again, written);
  EXPECT_EQ(slurp(dir_ / "b.svg"), slurp(dir_ / "a.svg"));
  ASSERT_EQ(run(from, &again), 0) << err();
  EXPECT_NE(again.find("compare allgather on dgx1"), std::string::npos) << again;

  auto doc = nlohmann::json::parse(written);
  doc["contenders"][1]["results"][2].erase("time_us");
  std::ofstream(dir_ / "bad.json") << doc.dump();
  ASSERT_NE(run("compare --from '" + (dir_ / "bad.json").string() + "'"), 0);
  EXPECT_NE(err().find("contenders[1].results[2].time_us"), std::string::npos) << err();
}
