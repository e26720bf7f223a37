// End-to-end: the real `optiflow` binary, its output, its exit codes and its error lines.
#include <gtest/gtest.h>

#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>
#include <sstream>

#include "e2e_support.hpp"
#include "optiflow/db/store.hpp"
#include "optiflow/topology/bounds.hpp"
#include "optiflow/topology/generators.hpp"
#include "optiflow/topology/topology_io.hpp"

namespace {

namespace fs = std::filesystem;
using namespace optiflow::topology;
using optiflow::support::Collective;

struct Result {
  int exit_code = -1;
  std::string out;
  std::string err;
};

using optiflow::e2e::slurp;

class Cli : public ::testing::Test {
 protected:
  void SetUp() override {
    dir_ = fs::temp_directory_path() /
           ("optiflow-e2e-" + std::to_string(::getpid()) + "-" +
            ::testing::UnitTest::GetInstance()->current_test_info()->name());
    fs::create_directories(dir_);
  }
  void TearDown() override { fs::remove_all(dir_); }

  Result run(const std::string& args) const {
    Result r;
    r.exit_code = optiflow::e2e::run_optiflow(dir_, args, &r.out);
    r.err = slurp(dir_ / "err");
    return r;
  }

  fs::path write(const std::string& name, const std::string& text) const {
    std::ofstream(dir_ / name) << text;
    return dir_ / name;
  }

  fs::path dir_;
};

TEST_F(Cli, TopoListNamesEveryFamily) {
  const Result r = run("topo list");
  ASSERT_EQ(r.exit_code, 0) << r.err;
  for (const char* name : {"a100x<K>", "a100x4-degraded", "dgx1", "ndv2x<K>", "ring<N>",
                           "torus<X>x<Y>", "fullmesh<N>", "fattree<N>"})
    EXPECT_NE(r.out.find(name), std::string::npos) << name;
}

TEST_F(Cli, TopoShowDescribesA100x4) {
  const Result r = run("topo show a100x4");
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_NE(r.out.find("32 ranks on 4 hosts"), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("nvswitch"), std::string::npos);
  EXPECT_NE(r.out.find("allgather lower bound at 1 GiB"), std::string::npos);
  EXPECT_NE(r.out.find("ranks 8-31"), std::string::npos) << r.out;
  EXPECT_TRUE(r.out.ends_with("leaves through 200 GB/s\n")) << r.out;
}

TEST_F(Cli, TopoShowJsonIsAReadableTopology) {
  const Result r = run("topo show a100x4-degraded --json");
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_EQ(parse_topology_json(r.out, "stdout"), make_a100x4_degraded());
  const auto doc = nlohmann::json::parse(r.out);
  EXPECT_EQ(doc["summary"]["ranks"], 32);
}

// topo vary writes a topology every other command reads, with the faults it drew; a seed
// draws the same faults again, and faults that do not fit are an error, not a crash.
TEST_F(Cli, TopoVaryWritesAVariedClusterOthersRead) {
  const Result r = run("topo vary a100x4 --seed 3 --faults 2 -o " + (dir_ / "v.json").string());
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_NE(r.out.find("a100x4-vary-s3-k2"), std::string::npos) << r.out;
  const auto varied = parse_topology_json(slurp(dir_ / "v.json"), "v.json");
  EXPECT_EQ(varied.name(), "a100x4-vary-s3-k2");
  const Result again = run("topo vary a100x4 --seed 3 --faults 2 -o " + (dir_ / "w.json").string());
  EXPECT_EQ(slurp(dir_ / "w.json"), slurp(dir_ / "v.json"));
  EXPECT_EQ(again.out.substr(again.out.find('\n')), r.out.substr(r.out.find('\n')));
  EXPECT_EQ(run("bound --topo " + (dir_ / "v.json").string() + " --sizes 1G").exit_code, 0);
  const Result too_many = run("topo vary fullmesh2 --faults 2 -o " + (dir_ / "x.json").string());
  EXPECT_EQ(too_many.exit_code, 2) << too_many.err;
  EXPECT_NE(too_many.err.find("only 1 of 2 faults fit on fullmesh2"), std::string::npos)
      << too_many.err;
}

TEST_F(Cli, BoundJsonMatchesTheLibrary) {
  const Result r = run("bound --topo a100x4 --sizes 1K:1G --json");
  ASSERT_EQ(r.exit_code, 0) << r.err;
  const auto doc = nlohmann::json::parse(r.out);
  EXPECT_EQ(doc["topology"], "a100x4");
  EXPECT_EQ(doc["collective"], "allgather");
  ASSERT_EQ(doc["results"].size(), 21u);
  const auto expected =
      LowerBound::compute(make_a100(4), Collective::all_gather).at(std::uint64_t{1} << 30);
  const auto& last = doc["results"].back();
  EXPECT_EQ(last["size_bytes"], std::uint64_t{1} << 30);
  EXPECT_DOUBLE_EQ(last["time_us"].get<double>(), expected.time_us);
  EXPECT_DOUBLE_EQ(last["busbw_GBps"].get<double>(), expected.busbw_GBps);
}

// `baseline nccl --json`: the simulation JSON with NCCL's choice per size; the schedule it
// writes simulates to the same times through `sim`.
TEST_F(Cli, BaselineNcclJsonNamesItsChoicesAndItsScheduleSimulatesTheSame) {
  const fs::path schedule = dir_ / "nccl.json";
  const Result r =
      run("baseline nccl --topo a100x2 --sizes 1K:1G --json -o '" + schedule.string() + "'");
  ASSERT_EQ(r.exit_code, 0) << r.err;
  const auto doc = nlohmann::json::parse(r.out);
  EXPECT_EQ(doc["topology"], "a100x2");
  EXPECT_EQ(doc["collective"], "allgather");
  ASSERT_EQ(doc["results"].size(), 21u);
  EXPECT_EQ(doc["results"].front()["protocol"], "LL");
  EXPECT_EQ(doc["results"].back()["protocol"], "Simple");
  for (const auto& row : doc["results"]) {
    EXPECT_EQ(row["algorithm"], "ring");
    EXPECT_EQ(row["channels"], 16);
    EXPECT_GE(row["bound_ratio"].get<double>(), 1.0);
  }
  const Result sim = run("sim '" + schedule.string() + "' --topo a100x2 --sizes 1K:1G --json");
  ASSERT_EQ(sim.exit_code, 0) << sim.err;
  const auto simulated = nlohmann::json::parse(sim.out);
  for (std::size_t i = 0; i < 21; ++i) {
    EXPECT_DOUBLE_EQ(simulated["results"][i]["time_us"].get<double>(),
                     doc["results"][i]["time_us"].get<double>());
    EXPECT_EQ(simulated["results"][i]["protocol"], doc["results"][i]["protocol"]);
  }
}

TEST_F(Cli, BaselineRejectsWhatItDoesNotBuild) {
  const Result unknown = run("baseline taccl-ish --topo a100x1");
  EXPECT_NE(unknown.exit_code, 0);
  EXPECT_NE(unknown.err.find("unknown baseline 'taccl-ish'"), std::string::npos) << unknown.err;
}

TEST_F(Cli, BoundTextHasOneRowPerSize) {
  const Result r = run("bound --topo dgx1 --collective allreduce --sizes 1M,64M,1G");
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_NE(r.out.find("allreduce on dgx1"), std::string::npos) << r.out;
  for (const char* size : {"\n        1M ", "\n       64M ", "\n        1G "})
    EXPECT_NE(r.out.find(size), std::string::npos) << size << " in\n" << r.out;
}

TEST_F(Cli, MalformedTopologyGetsOneClearLineAndNonZeroExit) {
  const fs::path bad = write("broken.json", R"({"nodes": [{"id": "g0", "kind": "gpu", "rank": 0}],
    "links": [{"src": "g0", "dst": "nowhere", "bw_GBps": 25}]})");
  const Result r = run("bound --topo '" + bad.string() + "'");
  EXPECT_EQ(r.exit_code, 2);
  EXPECT_EQ(r.err, bad.string() + ": error: links[0].dst: no node has id 'nowhere'\n");
  EXPECT_TRUE(r.out.empty());

  const fs::path syntax = write("syntax.json", "{\n  \"nodes\": [\n    {\"id\": }\n");
  const Result s = run("topo show '" + syntax.string() + "'");
  EXPECT_EQ(s.exit_code, 2);
  EXPECT_EQ(s.err.rfind(syntax.string() + ":3:", 0), 0u) << s.err;
  EXPECT_EQ(std::count(s.err.begin(), s.err.end(), '\n'), 1) << s.err;

  // Well-formed, but rank 1 cannot send: the error names the file, not the topology ("x").
  const fs::path split = write("split.json", R"({"name": "x",
    "nodes": [{"id": "g0", "kind": "gpu", "rank": 0}, {"id": "g1", "kind": "gpu", "rank": 1}],
    "links": [{"src": "g0", "dst": "g1", "bw_GBps": 25}]})");
  for (const std::string command : {"topo show", "bound --topo"}) {
    const Result d = run(command + " '" + split.string() + "'");
    EXPECT_EQ(d.exit_code, 2) << command;
    EXPECT_EQ(d.err, split.string() +
                         ": error: links: no link leads from rank 1 to the other GPUs, so no "
                         "collective can complete\n")
        << command;
  }
}

TEST_F(Cli, BadArgumentsAreRejected) {
  EXPECT_EQ(run("bound --topo no-such-thing").exit_code, 2);
  const Result sizes = run("bound --topo ring4 --sizes 1X");
  EXPECT_EQ(sizes.exit_code, 2);
  EXPECT_NE(sizes.err.find("--sizes"), std::string::npos) << sizes.err;
  const Result coll = run("bound --topo ring4 --collective gossip");
  EXPECT_EQ(coll.exit_code, 2);
  EXPECT_NE(coll.err.find("unknown collective 'gossip'"), std::string::npos) << coll.err;
  EXPECT_NE(run("frobnicate").exit_code, 0);
}

// A command group's options may come before or after its subcommand, with the same result.
TEST_F(Cli, GroupOptionsAreAcceptedAfterTheSubcommand) {
  const std::string db = (dir_ / "history.db").string();
  {
    auto store = optiflow::db::Store::open(db);
    optiflow::db::RunInfo info;
    info.topology_id = store.put_topology("ring4", write_topology_json(make_ring(4)));
    info.collective = "allgather";
    info.sizes = {1024};
    info.proposer = "offline";
    info.budget = 10;
    store.begin_run(info);
  }
  for (const std::string command : {"runs", "best", "export --format json"}) {
    const Result before = run("history --db '" + db + "' --model flow " + command);
    const Result after = run("history " + command + " --db '" + db + "' --model flow");
    ASSERT_EQ(before.exit_code, 0) << command << ": " << before.err;
    EXPECT_EQ(after.exit_code, 0) << command << ": " << after.err;
    EXPECT_EQ(after.out, before.out) << command;
  }
  EXPECT_NE(run("history runs --db '" + db + "'").out.find("ring4"), std::string::npos);
  // Options nobody declares are still rejected, wherever they stand.
  EXPECT_NE(run("history runs --db '" + db + "' --no-such-option").exit_code, 0);
  EXPECT_NE(run("topo show ring4 --db '" + db + "'").exit_code, 0);
}

TEST_F(Cli, ImportedNcclTopologyFeedsTheBound) {
  const fs::path xml = fs::path(OPTIFLOW_EXTERNAL_DIR) / "azhpc-images" / "ndv4-topo.xml";
  if (!fs::exists(xml)) GTEST_SKIP() << "shared external files absent: " << xml;
  const fs::path out = dir_ / "ndv4.json";
  const Result imported = run("topo import-nccl '" + xml.string() + "' -o '" + out.string() +
                              "' --hosts 2 --nvswitch-GBps 300");
  ASSERT_EQ(imported.exit_code, 0) << imported.err;
  EXPECT_NE(imported.out.find("16 ranks"), std::string::npos) << imported.out;
  const Result bound = run("bound --topo '" + out.string() + "' --sizes 1G --json");
  ASSERT_EQ(bound.exit_code, 0) << bound.err;
  const double busbw = nlohmann::json::parse(bound.out)["results"][0]["busbw_GBps"].get<double>();
  const Topology topo = read_topology_file(out.string());
  EXPECT_DOUBLE_EQ(
      busbw,
      LowerBound::compute(topo, Collective::all_gather).at(std::uint64_t{1} << 30).busbw_GBps);
  // The other 15 ranks' data enters a GPU through its NVSwitch port (300) and its PCIe Gen4 x16
  // link (16 GT/s x 16 lanes x 128/130 / 8 = 31.5 GB/s): at 1 GiB the bus bandwidth is that
  // ingress, short of it by the latencies' share (about 0.4%).
  double ingress_GBps = 0;
  for (LinkId id : topo.in_links(topo.gpu_of_rank(0))) ingress_GBps += topo.link(id).bw_GBps;
  EXPECT_NEAR(ingress_GBps, 300 + 16.0 * 16 * 128 / 130 / 8, 1e-9);
  EXPECT_LT(busbw, ingress_GBps);
  EXPECT_GT(busbw, 0.995 * ingress_GBps);
}

}  // namespace
