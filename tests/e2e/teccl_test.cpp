// End-to-end: `optiflow baseline teccl` on the DGX-1 cube-mesh, the real binary, its JSON.
#include <gtest/gtest.h>

#include <filesystem>
#include <nlohmann/json.hpp>

#include "e2e_support.hpp"

namespace {

namespace fs = std::filesystem;

class TecclCli : public ::testing::Test {
 protected:
  void SetUp() override {
    dir_ = fs::temp_directory_path() /
           ("optiflow-e2e-teccl-" + std::to_string(::getpid()) + "-" +
            ::testing::UnitTest::GetInstance()->current_test_info()->name());
    fs::create_directories(dir_);
  }
  void TearDown() override { fs::remove_all(dir_); }
  fs::path dir_;
};

// The schedule verifies (the command fails otherwise), is simulated at every size, and the
// JSON carries the solver's report; -o writes a schedule that `optiflow check` accepts.
TEST_F(TecclCli, BaselineTecclOnDgx1PrintsTheSolverReport) {
  const fs::path schedule = dir_ / "teccl.json";
  std::string out;
  const int code = optiflow::e2e::run_optiflow(
      dir_,
      "baseline teccl --topo dgx1 --sizes 1M,64M --time-limit 10 --json -o '" + schedule.string() +
          "'",
      &out);
  ASSERT_EQ(code, 0) << optiflow::e2e::slurp(dir_ / "err");
  const nlohmann::json doc = nlohmann::json::parse(out);
  EXPECT_EQ(doc.at("topology"), "dgx1");
  ASSERT_EQ(doc.at("results").size(), 2u);
  for (const auto& row : doc.at("results")) {
    EXPECT_EQ(row.at("algorithm"), "teccl");
    EXPECT_GT(row.at("time_us").get<double>(), 0);
  }
  const auto& solver = doc.at("solver");
  EXPECT_EQ(solver.at("solver").get<std::string>().rfind("CBC ", 0), 0u);
  EXPECT_FALSE(solver.at("status").get<std::string>().empty());
  EXPECT_TRUE(solver.at("gap").is_number());
  EXPECT_GT(solver.at("synthesis_s").get<double>(), 0);
  EXPECT_NE(optiflow::e2e::slurp(dir_ / "err").find("teccl: "), std::string::npos);
  EXPECT_EQ(optiflow::e2e::run_optiflow(dir_, "check '" + schedule.string() + "' --topo dgx1"), 0)
      << optiflow::e2e::slurp(dir_ / "err");
}

TEST_F(TecclCli, RejectsAnUnknownMode) {
  EXPECT_NE(optiflow::e2e::run_optiflow(dir_, "baseline teccl --topo ring4 --teccl-mode exact"), 0);
  EXPECT_NE(optiflow::e2e::slurp(dir_ / "err").find("--teccl-mode"), std::string::npos);
}

}  // namespace
