// TE-CCL import: the solver's real outputs become verified, simulable schedules; malformed
// files are errors that name the file and the field.
#include "optiflow/schedule/teccl_import.hpp"

#include <gtest/gtest.h>

#include <cmath>
#include <filesystem>
#include <fstream>
#include <string>

#include "optiflow/schedule/verifier.hpp"
#include "optiflow/sim/simulator.hpp"
#include "optiflow/support/error.hpp"
#include "optiflow/topology/topology_io.hpp"

namespace optiflow::schedule {
namespace {

namespace fs = std::filesystem;

const fs::path kTeccl = fs::path(OPTIFLOW_EXTERNAL_DIR) / "te-ccl";

class TecclImportTest : public ::testing::Test {
 protected:
  void SetUp() override {
    dir_ = fs::temp_directory_path() /
           ("teccl_import_" +
            std::string(::testing::UnitTest::GetInstance()->current_test_info()->name()));
    fs::create_directories(dir_);
  }
  void TearDown() override { fs::remove_all(dir_); }

  std::string write(const std::string& name, const std::string& text) const {
    const fs::path path = dir_ / name;
    std::ofstream(path) << text;
    return path.string();
  }

  /// TE-CCL's mesh.json input with the side length of the shipped mesh_4.json schedule.
  std::string mesh4_input() const {
    return write("mesh4_input.json", R"({"TopologyParams": {"name": "Mesh", "chassis": 1,
      "chunk_size": 100.0, "side_length": 4, "alpha": [0.0, 0.0]},
      "GurobiParams": {}, "InstanceParams": {"collective": 1, "num_chunks": 1,
      "switch_copy": false}})");
  }

  /// A 2x2 mesh (nodes 0-1 / 2-3, and 1->2 across the row, as TE-CCL links them).
  std::string mesh2_input() const {
    return write("mesh2_input.json", R"({"TopologyParams": {"name": "Mesh", "chunk_size": 1.0,
      "side_length": 2}, "InstanceParams": {"collective": 1, "num_chunks": 1}})");
  }

  static std::string schedule_with(const std::string& flows) {
    return R"({"1-Epoch_Duration": 0.01, "3-Epochs_Required": 2, "7-Flows": [)" + flows + "]}";
  }

  /// Flows of a correct 2x2 All-Gather: a ring 0->1->3->2->0 in three epochs.
  static std::string ring_flows() {
    std::string flows;
    const int ring[4] = {0, 1, 3, 2};
    for (int epoch = 0; epoch < 3; ++epoch)
      for (int i = 0; i < 4; ++i) {
        const int owner = ring[(i - epoch + 4) % 4];
        if (!flows.empty()) flows += ",";
        flows += "\"Chunk 0 from " + std::to_string(owner) + " traveled over " +
                 std::to_string(ring[i]) + "->" + std::to_string(ring[(i + 1) % 4]) + " in epoch " +
                 std::to_string(epoch) + "\"";
      }
    return flows;
  }

  /// The InputError `import_teccl` throws for this schedule text on the 2x2 mesh.
  std::string error_for(const std::string& schedule_text) const {
    const std::string input = mesh2_input();
    const std::string sched = write("bad.json", schedule_text);
    try {
      import_teccl(sched, input);
    } catch (const support::InputError& e) {
      return e.what();
    }
    return "no error";
  }

  fs::path dir_;
};

void expect_verified_and_simulable(const TecclImport& imported) {
  const VerifyResult verdict = verify_schedule(imported.schedule, &imported.topology);
  ASSERT_TRUE(verdict.ok()) << verdict.summary();
  const sim::Simulator simulator(imported.topology, imported.schedule);
  const sim::SimResult result = simulator.run(std::uint64_t{1} << 30);
  EXPECT_TRUE(std::isfinite(result.time_us));
  EXPECT_GT(result.time_us, 0);
  // The topology file round-trips link for link, so the routes stay valid when read back.
  EXPECT_EQ(topology::parse_topology_json(topology::write_topology_json(imported.topology), "t"),
            imported.topology);
}

TEST_F(TecclImportTest, Ndv2RealScheduleVerifiesAndSimulates) {
  if (!fs::exists(kTeccl)) GTEST_SKIP() << kTeccl << " is missing (TE-CCL's example files)";
  const TecclImport imported = import_teccl((kTeccl / "schedules/ndv2_schedule.json").string(),
                                            (kTeccl / "sample_inputs/ndv2_input.json").string());
  // TE-CCL treats node 0 of its 2-chassis NDv2 as a switch: 15 GPUs, 210 deliveries.
  EXPECT_EQ(imported.schedule.ranks, 15);
  EXPECT_EQ(imported.schedule.chunks, 15);
  EXPECT_EQ(imported.schedule.step_count(), 2u * 210u);
  EXPECT_EQ(imported.topology.name(), "teccl-ndv2x2");
  bool multicast_noted = false;
  for (const std::string& note : imported.notes)
    multicast_noted = multicast_noted || note.find("switch copies") != std::string::npos;
  EXPECT_TRUE(multicast_noted);
  expect_verified_and_simulable(imported);
}

TEST_F(TecclImportTest, Mesh4RealScheduleVerifiesAndSimulates) {
  if (!fs::exists(kTeccl)) GTEST_SKIP() << kTeccl << " is missing (TE-CCL's example files)";
  const TecclImport imported =
      import_teccl((kTeccl / "schedules/mesh_4.json").string(), mesh4_input());
  EXPECT_EQ(imported.schedule.ranks, 16);
  EXPECT_EQ(imported.schedule.step_count(), 2u * 240u);
  expect_verified_and_simulable(imported);
}

TEST_F(TecclImportTest, HandWrittenRingVerifies) {
  const TecclImport imported =
      import_teccl(write("ring.json", schedule_with(ring_flows())), mesh2_input());
  EXPECT_EQ(imported.schedule.ranks, 4);
  expect_verified_and_simulable(imported);
}

TEST_F(TecclImportTest, MissingKeyNamesTheField) {
  const std::string what = error_for(R"({"1-Epoch_Duration": 0.01, "3-Epochs_Required": 2})");
  EXPECT_NE(what.find("bad.json"), std::string::npos) << what;
  EXPECT_NE(what.find("7-Flows"), std::string::npos) << what;
}

TEST_F(TecclImportTest, MissingInputSectionNamesTheField) {
  const std::string input = write("input.json", R"({"InstanceParams": {}})");
  const std::string sched = write("s.json", schedule_with(ring_flows()));
  try {
    import_teccl(sched, input);
    FAIL() << "expected InputError";
  } catch (const support::InputError& e) {
    EXPECT_NE(std::string(e.what()).find("input.json"), std::string::npos) << e.what();
    EXPECT_NE(std::string(e.what()).find("TopologyParams"), std::string::npos) << e.what();
  }
}

TEST_F(TecclImportTest, UnparsableFlowNamesItsIndex) {
  const std::string what =
      error_for(schedule_with(R"("Chunk 0 from 0 traveled over 0->1 in epoch 0", "Chunk 0 from")"));
  EXPECT_NE(what.find("7-Flows[1]"), std::string::npos) << what;
}

TEST_F(TecclImportTest, NodeOutsideTheTopologyNamesTheFlow) {
  const std::string what =
      error_for(schedule_with(R"("Chunk 0 from 0 traveled over 0->9 in epoch 0")"));
  EXPECT_NE(what.find("7-Flows[0]"), std::string::npos) << what;
  EXPECT_NE(what.find("node 9"), std::string::npos) << what;
}

TEST_F(TecclImportTest, MissingLinkNamesTheFlow) {
  const std::string what =
      error_for(schedule_with(R"("Chunk 0 from 0 traveled over 0->3 in epoch 0")"));
  EXPECT_NE(what.find("7-Flows[0]"), std::string::npos) << what;
  EXPECT_NE(what.find("no link 0->3"), std::string::npos) << what;
}

TEST_F(TecclImportTest, ForwardingBeforeArrivalNamesTheFlow) {
  const std::string what =
      error_for(schedule_with(R"("Chunk 0 from 0 traveled over 1->3 in epoch 0",
      "Chunk 0 from 0 traveled over 0->1 in epoch 0")"));
  EXPECT_NE(what.find("7-Flows[0]"), std::string::npos) << what;
  EXPECT_NE(what.find("before it has received it"), std::string::npos) << what;
}

TEST_F(TecclImportTest, UndeliveredChunkIsAnError) {
  const std::string what =
      error_for(schedule_with(R"("Chunk 0 from 0 traveled over 0->1 in epoch 0")"));
  EXPECT_NE(what.find("7-Flows"), std::string::npos) << what;
  EXPECT_NE(what.find("never receives"), std::string::npos) << what;
}

}  // namespace
}  // namespace optiflow::schedule
