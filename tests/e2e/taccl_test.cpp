// End-to-end: `optiflow baseline taccl` on TACCL's own topology and sketch files, through the
// real binary; and its errors when the topology is given twice or not at all.
#include <gtest/gtest.h>
#include <unistd.h>

#include <filesystem>
#include <nlohmann/json.hpp>
#include <string>

#include "e2e_support.hpp"

namespace {

namespace fs = std::filesystem;

class TacclCli : public ::testing::Test {
 protected:
  void SetUp() override {
    dir_ = fs::temp_directory_path() /
           ("optiflow-e2e-taccl-" + std::to_string(::getpid()) + "-" +
            ::testing::UnitTest::GetInstance()->current_test_info()->name());
    fs::create_directories(dir_);
  }
  void TearDown() override { fs::remove_all(dir_); }
  int run(const std::string& args, std::string* out = nullptr) const {
    return optiflow::e2e::run_optiflow(dir_, args, out);
  }
  std::string err() const { return optiflow::e2e::slurp(dir_ / "err"); }

  fs::path dir_;
};

TEST_F(TacclCli, SynthesizesFromTacclsFilesAndReportsItsSolver) {
  const fs::path taccl = fs::path(OPTIFLOW_EXTERNAL_DIR) / "taccl";
  if (!fs::is_directory(taccl)) GTEST_SKIP() << taccl << " is absent (TACCL's files)";
  const fs::path schedule = dir_ / "taccl.json";
  std::string out;
  const int code =
      run("baseline taccl --taccl-topo '" + (taccl / "topo" / "topo-ndv2-1MB.json").string() +
              "' --sketch '" + (taccl / "sketch" / "sk1-ndv2-n1.json").string() +
              "' --sizes 1K,1M --time-limit 1 --json -o '" + schedule.string() + "'",
          &out);
  ASSERT_EQ(code, 0) << err();
  const auto doc = nlohmann::json::parse(out);
  EXPECT_EQ(doc["topology"], "NDv2_1MB");
  ASSERT_EQ(doc["results"].size(), 2u);
  for (const auto& row : doc["results"]) EXPECT_GE(row["bound_ratio"].get<double>(), 1.0);
  EXPECT_EQ(doc["solver"]["solver"].get<std::string>().rfind("CBC", 0), 0u);
  EXPECT_TRUE(doc["solver"]["status"].is_string());
  EXPECT_GT(doc["solver"]["synthesis_s"].get<double>(), 0);
  EXPECT_NE(err().find("taccl: routing MILP"), std::string::npos) << err();  // progress lines
  EXPECT_TRUE(fs::exists(schedule));
}

TEST_F(TacclCli, NeedsExactlyOneTopology) {
  EXPECT_NE(run("baseline taccl"), 0);
  EXPECT_NE(err().find("exactly one of --topo T and --taccl-topo FILE"), std::string::npos)
      << err();
  EXPECT_NE(run("baseline taccl --topo dgx1 --taccl-topo x.json"), 0);
  EXPECT_NE(err().find("exactly one of"), std::string::npos) << err();
}

}  // namespace
