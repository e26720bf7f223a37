// Tests for MSCCL XML export and import: round trips (dependency nops inserted and folded,
// routes), what TACCL and TE-CCL write, the diagnostics, and the real files of
// msccl-executor-nccl and TE-CCL.
#include "optiflow/schedule/msccl_xml.hpp"

#include <gtest/gtest.h>

#include <algorithm>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <string>
#include <vector>

#include "optiflow/schedule/schedule_io.hpp"
#include "optiflow/support/error.hpp"

namespace optiflow::schedule {
namespace {

Step step(StepKind kind, BufferKind src, int src_off, BufferKind dst, int dst_off, int count,
          std::vector<StepRef> deps = {}, std::vector<topology::LinkId> route = {}) {
  return Step{kind, src, src_off, dst, dst_off, count, std::move(deps), std::move(route)};
}

// A ring All-Gather, in place, one chunk per rank: rank r's tb 0 sends to r+1 its own chunk and
// then each chunk its tb 1 received from r-1, waiting for that receive.
Schedule ring_allgather(int ranks) {
  Schedule schedule;
  schedule.name = "ring";
  schedule.ranks = ranks;
  schedule.chunks = ranks;
  schedule.protocol = "LL128";
  for (int r = 0; r < ranks; ++r) {
    RankProgram program{0, ranks, 0, {}};
    ThreadBlock send{(r + 1) % ranks, -1, 0, {}};
    ThreadBlock recv{-1, (r + ranks - 1) % ranks, 0, {}};
    for (int k = 0; k + 1 < ranks; ++k) {
      const int sent = (r - k + ranks) % ranks;
      const int received = (r - 1 - k + 2 * ranks) % ranks;
      std::vector<StepRef> deps;
      if (k > 0) deps.push_back({1, k - 1});
      send.steps.push_back(
          step(StepKind::send, BufferKind::output, sent, BufferKind::output, sent, 1, deps));
      recv.steps.push_back(
          step(StepKind::recv, BufferKind::output, received, BufferKind::output, received, 1));
    }
    program.tbs = {send, recv};
    schedule.programs.push_back(program);
  }
  return schedule;
}

// The ring, plus steps with several dependencies on rank 0 (a third thread block with a copy that
// waits for three steps, a genuine nop, a reduce, and a genuine nop with two dependencies; the
// last send also waits for the copy) and routes on rank 1's sends.
Schedule ring_with_multi_deps() {
  Schedule schedule = ring_allgather(4);
  RankProgram& rank0 = schedule.programs[0];
  rank0.scratch_chunks = 1;
  ThreadBlock local{-1, -1, 1, {}};
  local.steps = {
      step(StepKind::copy, BufferKind::output, 0, BufferKind::scratch, 0, 1,
           {{1, 2}, {1, 0}, {0, 1}}),
      step(StepKind::nop, BufferKind::output, 0, BufferKind::output, 0, 0, {{1, 1}}),
      step(StepKind::reduce, BufferKind::output, 1, BufferKind::scratch, 0, 1, {{2, 1}}),
      step(StepKind::nop, BufferKind::output, 0, BufferKind::output, 0, 0, {{0, 0}, {1, 0}}),
  };
  rank0.tbs.push_back(local);
  rank0.tbs[0].steps[2].deps.push_back({2, 0});
  for (Step& send : schedule.programs[1].tbs[0].steps) send.route = {3, 17};
  return schedule;
}

// The <step .../> lines of one thread block of one gpu, trimmed.
std::vector<std::string> step_lines(const std::string& xml, int gpu, int tb) {
  std::istringstream in(xml);
  std::vector<std::string> lines;
  std::string line;
  int current_gpu = -1, current_tb = -1;
  while (std::getline(in, line)) {
    line.erase(0, line.find_first_not_of(' '));
    if (line.starts_with("<gpu id=")) current_gpu = std::stoi(line.substr(9));
    if (line.starts_with("<tb id=")) current_tb = std::stoi(line.substr(8));
    if (line.starts_with("<step") && current_gpu == gpu && current_tb == tb) lines.push_back(line);
  }
  return lines;
}

support::InputError xml_error(std::string_view xml) {
  try {
    parse_msccl_xml(xml, "bad.xml");
  } catch (const support::InputError& e) {
    return e;
  }
  ADD_FAILURE() << "no error for:\n" << xml;
  return support::InputError({}, "");
}

// A small TE-CCL style file: extra attributes, no outofplace/minBytes/maxBytes, in-place <copy>
// elements, i_chunks > 0, a thread block that sends and receives, and dependency nops. Its
// hasdep attributes are all 0: import ignores them (export recomputes them).
constexpr std::string_view kTeCclStyle = R"(<algo name="teccl" nchannels="1" nchunksperloop="4"
    proto="Simple" coll="allgather" inplace="1" redop="nop" ngpus="2">
  <gpu id="0" i_chunks="2" o_chunks="4" s_chunks="0">
    <copy i_off="0" o_off="0"/>
    <copy i_off="1" o_off="1"/>
    <tb id="0" send="1" recv="1" chan="0">
      <step s="0" type="s" srcbuf="o" srcoff="0" dstbuf="o" dstoff="0" cnt="2" depid="-1" deps="-1" hasdep="0"/>
      <step s="1" type="r" srcbuf="o" srcoff="2" dstbuf="o" dstoff="2" cnt="1" depid="-1" deps="-1" hasdep="0"/>
      <step s="2" type="r" srcbuf="o" srcoff="3" dstbuf="o" dstoff="3" cnt="1" depid="-1" deps="-1" hasdep="0"/>
    </tb>
  </gpu>
  <gpu id="1" i_chunks="2" o_chunks="4" s_chunks="0">
    <copy i_off="0" o_off="2"/>
    <copy i_off="1" o_off="3"/>
    <tb id="0" send="-1" recv="0" chan="0">
      <step s="0" type="r" srcbuf="o" srcoff="0" dstbuf="o" dstoff="0" cnt="1" depid="-1" deps="-1" hasdep="0"/>
      <step s="1" type="r" srcbuf="o" srcoff="1" dstbuf="o" dstoff="1" cnt="1" depid="-1" deps="-1" hasdep="0"/>
    </tb>
    <tb id="1" send="0" recv="-1" chan="0">
      <step s="0" type="nop" srcbuf="i" srcoff="-1" dstbuf="o" dstoff="-1" cnt="0" depid="0" deps="1" hasdep="0"/>
      <step s="1" type="s" srcbuf="o" srcoff="2" dstbuf="o" dstoff="2" cnt="2" depid="0" deps="0" hasdep="0"/>
      <step s="2" type="nop" srcbuf="i" srcoff="-1" dstbuf="o" dstoff="-1" cnt="0" depid="0" deps="1" hasdep="0"/>
    </tb>
  </gpu>
</algo>
)";

TEST(MscclXml, RoundTripIsIdentity) {
  const Schedule ring = ring_allgather(4);
  const std::string xml = write_msccl_xml(ring);
  EXPECT_EQ(parse_msccl_xml(xml, "ring.xml"), ring);
  EXPECT_EQ(xml.find("type=\"nop\""), std::string::npos);
}

TEST(MscclXml, MultipleDependenciesBecomeNopsAndFoldBack) {
  const Schedule schedule = ring_with_multi_deps();
  const std::string xml = write_msccl_xml(schedule);
  const std::vector<std::string> local = {
      R"(<step s="0" type="nop" srcbuf="i" srcoff="-1" dstbuf="o" dstoff="-1" cnt="0" depid="1" deps="0" hasdep="0"/>)",
      R"(<step s="1" type="nop" srcbuf="i" srcoff="-1" dstbuf="o" dstoff="-1" cnt="0" depid="0" deps="1" hasdep="0"/>)",
      R"(<step s="2" type="cpy" srcbuf="o" srcoff="0" dstbuf="s" dstoff="0" cnt="1" depid="1" deps="2" hasdep="1"/>)",
      R"(<step s="3" type="nop" srcbuf="o" srcoff="0" dstbuf="o" dstoff="0" cnt="0" depid="1" deps="1" hasdep="1"/>)",
      R"(<step s="4" type="re" srcbuf="o" srcoff="1" dstbuf="s" dstoff="0" cnt="1" depid="2" deps="3" hasdep="0"/>)",
      R"(<step s="5" type="nop" srcbuf="i" srcoff="-1" dstbuf="o" dstoff="-1" cnt="0" depid="1" deps="0" hasdep="0"/>)",
      R"(<step s="6" type="nop" srcbuf="o" srcoff="0" dstbuf="o" dstoff="0" cnt="0" depid="0" deps="0" hasdep="0"/>)",
  };
  EXPECT_EQ(step_lines(xml, 0, 2), local);
  // The last send of rank 0 waits for the copy, now step 2 of tb 2, through a nop of its own.
  const std::vector<std::string> sends = step_lines(xml, 0, 0);
  ASSERT_EQ(sends.size(), 4u);
  EXPECT_NE(sends[2].find(R"(type="nop" srcbuf="i" srcoff="-1")"), std::string::npos);
  EXPECT_NE(sends[2].find(R"(depid="2" deps="2")"), std::string::npos) << sends[2];
  EXPECT_NE(sends[3].find(R"(s="3" type="s")"), std::string::npos) << sends[3];
  EXPECT_NE(sends[3].find(R"(depid="1" deps="1")"), std::string::npos) << sends[3];
  EXPECT_EQ(parse_msccl_xml(xml, "multi.xml"), schedule);
}

TEST(MscclXml, RoutesTravelAsAnAttribute) {
  const Schedule schedule = ring_with_multi_deps();
  const std::string xml = write_msccl_xml(schedule);
  const std::vector<std::string> sends = step_lines(xml, 1, 0);
  ASSERT_EQ(sends.size(), 3u);
  for (const std::string& line : sends)
    EXPECT_TRUE(line.ends_with(R"( hasdep="0" route="3,17"/>)")) << line;
  EXPECT_EQ(parse_msccl_xml(xml, "routes.xml").programs[1].tbs[0].steps[0].route,
            (std::vector<topology::LinkId>{3, 17}));
}

TEST(MscclXml, HeaderFollowsTheExecutor) {
  Schedule schedule = ring_allgather(4);
  schedule.name = "a<b & \"c\"";
  schedule.programs[3].tbs[1].channel = 6;
  std::string xml = write_msccl_xml(schedule, {1024, 1048575, true});
  EXPECT_TRUE(xml.starts_with(
      R"(<algo name="a&lt;b &amp; &quot;c&quot;" proto="LL128" nchannels="7" nchunksperloop="4" )"
      R"(ngpus="4" coll="allgather" inplace="1" outofplace="1" minBytes="1024" maxBytes="1048575">)"))
      << xml.substr(0, 200);
  EXPECT_EQ(parse_msccl_xml(xml, "x.xml"), schedule);

  schedule.inplace = false;
  schedule.collective = support::Collective::reduce_scatter;
  schedule.topology = "ring4";
  xml = write_msccl_xml(schedule);
  EXPECT_NE(xml.find(R"(coll="reducescatter" inplace="0" outofplace="1" topology="ring4">)"),
            std::string::npos)
      << xml.substr(0, 200);
  EXPECT_EQ(xml.find("minBytes"), std::string::npos);
  EXPECT_EQ(parse_msccl_xml(xml, "x.xml"), schedule);
}

TEST(MscclXmlImport, AcceptsTeCclStyle) {
  const Schedule schedule = parse_msccl_xml(kTeCclStyle, "teccl.xml");
  EXPECT_EQ(schedule.name, "teccl");
  EXPECT_EQ(schedule.topology, "");
  EXPECT_EQ(schedule.ranks, 2);
  EXPECT_EQ(schedule.chunks, 4);
  EXPECT_TRUE(schedule.inplace);
  EXPECT_EQ(schedule.programs[1].input_chunks, 2);
  const ThreadBlock& sender = schedule.programs[1].tbs[1];
  // The first nop folds into the send; the last one ends its thread block and stays, with the
  // offsets MSCCL leaves at -1 read as 0.
  ASSERT_EQ(sender.steps.size(), 2u);
  EXPECT_EQ(sender.steps[0].kind, StepKind::send);
  EXPECT_EQ(sender.steps[0].deps, (std::vector<StepRef>{{0, 0}, {0, 1}}));
  EXPECT_EQ(sender.steps[1],
            step(StepKind::nop, BufferKind::input, 0, BufferKind::output, 0, 0, {{0, 1}}));
  EXPECT_EQ(parse_msccl_xml(write_msccl_xml(schedule), "again.xml"), schedule);
}

TEST(MscclXmlImport, TacclNamesAndANopThatIsDependedOnStays) {
  std::string xml(kTeCclStyle);
  xml.replace(xml.find("coll=\"allgather\""), 16, "coll=\"reduce_scatter\"");
  xml.replace(xml.find("<copy i_off=\"0\" o_off=\"0\"/>"), 27, "");
  xml.replace(xml.find("<copy i_off=\"1\" o_off=\"1\"/>"), 27, "");
  xml.replace(xml.find("<copy i_off=\"0\" o_off=\"2\"/>"), 27, "");
  xml.replace(xml.find("<copy i_off=\"1\" o_off=\"3\"/>"), 27, "");
  // gpu 1's tb 0 now waits for the first nop of tb 1.
  const std::string first_recv = R"(srcoff="0" dstbuf="o" dstoff="0" cnt="1" depid="-1" deps="-1")";
  const auto at = xml.rfind(first_recv);
  xml.replace(at, first_recv.size(),
              R"(srcoff="0" dstbuf="o" dstoff="0" cnt="1" depid="1" deps="0")");
  const Schedule schedule = parse_msccl_xml(xml, "taccl.xml");
  EXPECT_EQ(schedule.collective, support::Collective::reduce_scatter);
  ASSERT_EQ(schedule.programs[1].tbs[1].steps.size(), 3u);
  EXPECT_EQ(schedule.programs[1].tbs[0].steps[0].deps, (std::vector<StepRef>{{1, 0}}));
}

TEST(MscclXmlImport, CopiesThatAreNotAliasesAreRejected) {
  std::string xml(kTeCclStyle);
  xml.replace(xml.find("<copy i_off=\"1\" o_off=\"3\"/>"), 27, "<copy i_off=\"1\" o_off=\"1\"/>");
  const support::InputError e = xml_error(xml);
  EXPECT_EQ(e.where().line, 14);
  EXPECT_EQ(e.where().field, "<copy>");
  EXPECT_NE(std::string(e.what()).find("not supported yet (gpu 1)"), std::string::npos) << e.what();
}

TEST(MscclXmlErrors, StepAttributes) {
  struct Case {
    std::string from, to, field, message;
  };
  const Case cases[] = {
      {R"(dstoff="2" cnt="1")", R"(dstoff="2")", R"(<step s="1">.cnt)",
       "missing (required attribute) (gpu 0, tb 0)"},
      {R"(dstoff="2" cnt="1")", R"(dstoff="2" cnt="1x")", R"(<step s="1">.cnt)",
       "'1x' is not an integer (gpu 0, tb 0)"},
      {R"(s="1" type="r")", R"(s="1" type="recv")", R"(<step s="1">.type)",
       "unknown 'recv' (s|r|rcs|rrc|rrs|rrcs|cpy|re|nop) (gpu 0, tb 0)"},
      {R"(s="1" type="r" srcbuf="o")", R"(s="1" type="r" srcbuf="x")", R"(<step s="1">.srcbuf)",
       "unknown 'x' (i|o|s)"},
      {R"(s="1" type="r")", R"(s="7" type="r")", R"(<step s="7">.s)", "must be 1"},
      {R"(dstoff="2" cnt="1")", R"(dstoff="-1" cnt="1")", R"(<step s="1">.dstoff)",
       "must be >= 0 for a 'r' step"},
      {R"(depid="0" deps="0")", R"(depid="0" deps="5")", R"(<step s="1">.deps)",
       "thread block 0 has no step 5 (gpu 1, tb 1)"},
      {R"(depid="0" deps="0")", R"(depid="4" deps="0")", R"(<step s="1">.depid)",
       "no thread block 4 on this gpu (gpu 1, tb 1)"},
      {R"(<tb id="1" send="0")", R"(<tb id="2" send="0")", R"(<tb id="2">.id)",
       "thread block ids must be 0..1"},
      {R"(<tb id="1" send="0" recv="-1" chan="0">)", R"(<tb id="1" send="0" recv="-1">)",
       R"(<tb id="1">.chan)", "missing"},
      {R"(coll="allgather")", R"(coll="gather")", "<algo>.coll", "unknown 'gather'"},
      {R"(proto="Simple")", R"(proto="LL64")", "<algo>.proto", "unknown protocol 'LL64'"},
      {R"(ngpus="2")", R"(ngpus="3")", "<algo>.ngpus", R"(no <gpu id="2">)"},
      {R"(<gpu id="1")", R"(<gpu id="0")", R"(<gpu id="0">.id)", "duplicate gpu id"},
      {R"(<copy i_off="0" o_off="0"/>)", R"(<op i_off="0"/>)", "<op>", "unexpected element"},
  };
  for (const Case& c : cases) {
    SCOPED_TRACE(c.to);
    std::string xml(kTeCclStyle);
    const auto at = xml.find(c.from);
    ASSERT_NE(at, std::string::npos) << c.from;
    xml.replace(at, c.from.size(), c.to);
    const support::InputError e = xml_error(xml);
    EXPECT_EQ(e.where().file, "bad.xml");
    EXPECT_GT(e.where().line, 0);
    EXPECT_EQ(e.where().field, c.field);
    EXPECT_NE(std::string(e.what()).find(c.message), std::string::npos) << e.what();
  }
}

TEST(MscclXmlErrors, LineNumbersAndSyntax) {
  std::string xml(kTeCclStyle);
  xml.replace(xml.find(R"(dstoff="3" cnt="1")"), 18, R"(dstoff="3" cnt="-1")");
  support::InputError e = xml_error(xml);
  EXPECT_EQ(e.where().line, 9);
  EXPECT_NE(std::string(e.what()).find(R"(bad.xml:9: error: <step s="2">.cnt: -1 is out of range)"),
            std::string::npos)
      << e.what();

  e = xml_error("<algo ngpus=\"1\">\n  <gpu id=\"0\">\n</algo>\n");
  EXPECT_GT(e.where().line, 0);
  EXPECT_NE(std::string(e.what()).find("malformed XML: mismatched element"), std::string::npos)
      << e.what();

  e = xml_error("<system version=\"1\"/>");
  EXPECT_NE(std::string(e.what()).find("root element must be <algo>"), std::string::npos);
}

// The real files: what msccl-executor-nccl shipped for Azure NDv4/NDv5, and TE-CCL's example.
struct RealFile {
  const char* path;
  support::Collective collective;
  int ranks, chunks;
  std::size_t steps;  // after folding the dependency nops
  const char* protocol;
  std::uint64_t min_bytes, max_bytes;  // max 0: the <algo> line is not ours to reproduce
};
constexpr RealFile kRealFiles[] = {
    {"msccl-executor-nccl/ndv5-ag-1k-512k.xml", support::Collective::all_gather, 8, 16, 224, "LL",
     1024, 1048575},
    {"msccl-executor-nccl/ndv5-ag-1m.xml", support::Collective::all_gather, 8, 32, 448, "LL",
     1048576, 2097151},
    {"msccl-executor-nccl/ndv5-ag-32m-1g.xml", support::Collective::all_gather, 8, 256, 2048,
     "Simple", 33554432, 1073741824},
    {"msccl-executor-nccl/ndv5-ar-1k-512k.xml", support::Collective::all_reduce, 8, 16, 448, "LL",
     1024, 1048575},
    {"msccl-executor-nccl/ndv4-r48ll.xml", support::Collective::all_reduce, 8, 64, 960, "LL",
     266240, 2078720},
    {"te-ccl/MSCCL_examples/amd_32.xml", support::Collective::all_gather, 32, 64, 3820, "Simple", 0,
     0},
};

std::filesystem::path external_dir() {
  return OPTIFLOW_EXTERNAL_DIR;
}

std::string read_text(const std::filesystem::path& path) {
  std::ifstream in(path, std::ios::binary);
  std::ostringstream text;
  text << in.rdbuf();
  return text.str();
}

// The lines of an XML file without comments and the <copy> elements that import drops.
std::vector<std::string> significant_lines(const std::string& text) {
  std::vector<std::string> lines;
  std::istringstream in(text);
  std::string line;
  while (std::getline(in, line))
    if (!line.starts_with("<!--") && line.find("<copy ") == std::string::npos)
      lines.push_back(line);
  return lines;
}

TEST(MscclXmlRealFiles, ImportAndRoundTrip) {
  int imported = 0;
  for (const RealFile& file : kRealFiles) {
    const std::filesystem::path path = external_dir() / file.path;
    if (!std::filesystem::exists(path)) continue;
    SCOPED_TRACE(path.string());
    const Schedule schedule = read_schedule_file(path.string());
    EXPECT_EQ(schedule.collective, file.collective);
    EXPECT_EQ(schedule.ranks, file.ranks);
    EXPECT_EQ(schedule.chunks, file.chunks);
    EXPECT_EQ(schedule.protocol, file.protocol);
    EXPECT_TRUE(schedule.inplace);
    EXPECT_EQ(schedule.step_count(), file.steps);
    const std::string xml = write_msccl_xml(schedule, {file.min_bytes, file.max_bytes, false});
    EXPECT_EQ(parse_msccl_xml(xml, "again.xml"), schedule);
    EXPECT_EQ(parse_schedule_json(write_schedule_json(schedule), "again.json"), schedule);
    // Export writes the same conventions: the files come back line for line, dependency nops
    // and hasdep included.
    std::vector<std::string> expected = significant_lines(read_text(path));
    std::vector<std::string> written = significant_lines(xml);
    if (file.max_bytes == 0 && !expected.empty() && !written.empty()) {
      expected.erase(expected.begin());
      written.erase(written.begin());
    }
    EXPECT_EQ(written, expected);
    ++imported;
  }
  if (imported == 0) GTEST_SKIP() << "no MSCCL XML under " << external_dir() << " (absent)";
}

TEST(MscclXmlRealFiles, TeCclNopsFoldIntoMultipleDependencies) {
  const std::filesystem::path path = external_dir() / "te-ccl/MSCCL_examples/amd_32.xml";
  if (!std::filesystem::exists(path)) GTEST_SKIP() << path << " is absent";
  const Schedule schedule = read_msccl_xml_file(path.string());
  std::vector<int> by_dep_count(5, 0);
  for (const RankProgram& program : schedule.programs) {
    EXPECT_EQ(program.input_chunks, 2);
    for (const ThreadBlock& tb : program.tbs)
      for (const Step& s : tb.steps) {
        EXPECT_NE(s.kind, StepKind::nop);
        ++by_dep_count.at(s.deps.size());
      }
  }
  // Counted in the file: 66 nops give 46 steps two dependencies, 7 three and 2 four.
  EXPECT_EQ(by_dep_count, (std::vector<int>{2312, 1453, 46, 7, 2}));
}

}  // namespace
}  // namespace optiflow::schedule
