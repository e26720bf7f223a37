// Tests for the schedule IR's names and the schedule JSON format: round trips, the exact layout,
// and the diagnostics for malformed files.
#include "optiflow/schedule/schedule_io.hpp"

#include <gtest/gtest.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <sstream>
#include <string>

#include "optiflow/schedule/msccl_xml.hpp"
#include "optiflow/schedule/schedule.hpp"
#include "optiflow/support/error.hpp"
#include "optiflow/support/hash.hpp"

namespace optiflow::schedule {
namespace {

// A ring All-Gather, in place, one chunk per rank. Rank r's tb 0 sends to r+1: first its own
// chunk, then each chunk that its tb 1 received from r-1, waiting for that receive. Sends carry
// a made-up route so that routes take part in the round trips.
Schedule ring_allgather(int ranks) {
  Schedule schedule;
  schedule.name = "ring";
  schedule.collective = support::Collective::all_gather;
  schedule.ranks = ranks;
  schedule.chunks = ranks;
  schedule.protocol = "LL";
  schedule.inplace = true;
  schedule.topology = "ring4";
  for (int r = 0; r < ranks; ++r) {
    RankProgram program;
    program.output_chunks = ranks;
    ThreadBlock send{(r + 1) % ranks, -1, 0, {}};
    ThreadBlock recv{-1, (r + ranks - 1) % ranks, 0, {}};
    for (int k = 0; k + 1 < ranks; ++k) {
      const int sent = (r - k + ranks) % ranks;
      Step step{StepKind::send, BufferKind::output, sent, BufferKind::output, sent, 1, {}, {}};
      if (k > 0) step.deps = {StepRef{1, k - 1}};
      step.route = {static_cast<topology::LinkId>(2 * r), static_cast<topology::LinkId>(2 * r + 1)};
      send.steps.push_back(step);
      const int received = (r - 1 - k + 2 * ranks) % ranks;
      recv.steps.push_back(
          {StepKind::recv, BufferKind::output, received, BufferKind::output, received, 1, {}, {}});
    }
    program.tbs = {send, recv};
    schedule.programs.push_back(program);
  }
  return schedule;
}

// Parses `text` expecting an InputError, and returns it.
support::InputError json_error(std::string_view text) {
  try {
    parse_schedule_json(text, "bad.json");
  } catch (const support::InputError& e) {
    return e;
  }
  ADD_FAILURE() << "no error for:\n" << text;
  return support::InputError({}, "");
}

// The ring's JSON with one substring replaced, for targeted corruptions.
std::string ring_json_with(const std::string& from, const std::string& to) {
  std::string text = write_schedule_json(ring_allgather(4));
  const auto at = text.find(from);
  EXPECT_NE(at, std::string::npos) << from;
  if (at != std::string::npos) text.replace(at, from.size(), to);
  return text;
}

TEST(ScheduleNames, StepAndBufferKindsRoundTrip) {
  for (std::string_view name : {"s", "r", "rcs", "rrc", "rrs", "rrcs", "cpy", "re", "nop"}) {
    const auto kind = step_kind_from_string(name);
    ASSERT_TRUE(kind) << name;
    EXPECT_EQ(to_string(*kind), name);
  }
  for (std::string_view name : {"i", "o", "s"}) {
    const auto kind = buffer_kind_from_string(name);
    ASSERT_TRUE(kind) << name;
    EXPECT_EQ(to_string(*kind), name);
  }
  EXPECT_FALSE(step_kind_from_string("send"));
  EXPECT_FALSE(buffer_kind_from_string("input"));
}

TEST(ScheduleNames, SendsReceivesReduces) {
  struct Expected {
    StepKind kind;
    bool sends, receives, reduces;
  };
  const Expected table[] = {{StepKind::send, true, false, false},
                            {StepKind::recv, false, true, false},
                            {StepKind::recv_copy_send, true, true, false},
                            {StepKind::recv_reduce_copy, false, true, true},
                            {StepKind::recv_reduce_send, true, true, true},
                            {StepKind::recv_reduce_copy_send, true, true, true},
                            {StepKind::copy, false, false, false},
                            {StepKind::reduce, false, false, true},
                            {StepKind::nop, false, false, false}};
  for (const Expected& e : table) {
    SCOPED_TRACE(to_string(e.kind));
    EXPECT_EQ(step_sends(e.kind), e.sends);
    EXPECT_EQ(step_receives(e.kind), e.receives);
    EXPECT_EQ(step_reduces(e.kind), e.reduces);
  }
}

TEST(ScheduleIr, StepCountSumsAllThreadBlocks) {
  EXPECT_EQ(ring_allgather(4).step_count(), 4u * 2 * 3);
  EXPECT_EQ(Schedule{}.step_count(), 0u);
}

TEST(ScheduleJson, RoundTripIsIdentity) {
  Schedule schedule = ring_allgather(4);
  schedule.name = "ring \"quoted\" \xC3\xA9";
  schedule.programs[2].scratch_chunks = 3;
  schedule.programs[2].tbs.push_back(ThreadBlock{-1, -1, 5, {}});
  schedule.programs[2].tbs.back().steps.push_back(
      {StepKind::nop, BufferKind::input, 0, BufferKind::scratch, 2, 0, {{0, 1}, {1, 0}}, {}});
  const std::string text = write_schedule_json(schedule);
  EXPECT_EQ(parse_schedule_json(text, "ring.json"), schedule);
  EXPECT_EQ(write_schedule_json(parse_schedule_json(text, "ring.json")), text);
}

TEST(ScheduleJson, WritesOneLinePerStepAndOmitsEmptyLists) {
  Schedule schedule;
  schedule.name = "tiny";
  schedule.ranks = 2;
  schedule.chunks = 2;
  schedule.inplace = false;
  RankProgram sender{1, 2, 0, {ThreadBlock{1, -1, 0, {}}}};
  sender.tbs[0].steps.push_back(
      {StepKind::send, BufferKind::input, 0, BufferKind::output, 0, 1, {}, {7}});
  RankProgram receiver{1, 2, 0, {ThreadBlock{-1, 0, 0, {}}, ThreadBlock{}}};
  receiver.tbs[0].steps.push_back(
      {StepKind::recv, BufferKind::input, 0, BufferKind::output, 0, 1, {}, {}});
  receiver.tbs[0].steps.push_back(
      {StepKind::copy, BufferKind::input, 0, BufferKind::output, 1, 1, {{1, 0}}, {}});
  schedule.programs = {sender, receiver};
  const std::string expected = R"({
  "format": "optiflow-schedule",
  "version": 1,
  "name": "tiny",
  "collective": "allgather",
  "ranks": 2,
  "chunks": 2,
  "protocol": "Simple",
  "inplace": false,
  "topology": "",
  "programs": [
    {"rank":0,"input_chunks":1,"output_chunks":2,"scratch_chunks":0,"tbs":[
      {"send":1,"recv":-1,"channel":0,"steps":[
        {"type":"s","src":"i","src_off":0,"dst":"o","dst_off":0,"count":1,"route":[7]}
      ]}
    ]},
    {"rank":1,"input_chunks":1,"output_chunks":2,"scratch_chunks":0,"tbs":[
      {"send":-1,"recv":0,"channel":0,"steps":[
        {"type":"r","src":"i","src_off":0,"dst":"o","dst_off":0,"count":1},
        {"type":"cpy","src":"i","src_off":0,"dst":"o","dst_off":1,"count":1,"deps":[[1,0]]}
      ]},
      {"send":-1,"recv":-1,"channel":0,"steps":[]}
    ]}
  ]
}
)";
  EXPECT_EQ(write_schedule_json(schedule), expected);
  EXPECT_EQ(parse_schedule_json(expected, "tiny.json"), schedule);
  EXPECT_EQ(schedule_hash(schedule), support::content_hash(expected));
}

TEST(ScheduleJson, HashIsTheContentHashOfTheText) {
  for (int ranks : {2, 3, 8}) {
    const Schedule ring = ring_allgather(ranks);
    EXPECT_EQ(schedule_hash(ring), support::content_hash(write_schedule_json(ring)));
  }
  Schedule renamed = ring_allgather(4);
  renamed.name = "other \"quoted\" name";
  EXPECT_NE(schedule_hash(renamed), schedule_hash(ring_allgather(4)));
  EXPECT_EQ(schedule_hash(renamed), support::content_hash(write_schedule_json(renamed)));
}

TEST(ScheduleJson, OptionalFieldsTakeTheirDefaults) {
  const Schedule schedule = parse_schedule_json(R"({"format": "optiflow-schedule",
      "collective": "all-gather", "ranks": 1, "chunks": 1, "inplace": true,
      "programs": [{"rank": 0, "input_chunks": 0, "output_chunks": 1,
                    "tbs": [{"steps": []}]}]})",
                                                "dir/mine.json");
  EXPECT_EQ(schedule.name, "mine");
  EXPECT_EQ(schedule.protocol, "Simple");
  EXPECT_EQ(schedule.topology, "");
  EXPECT_EQ(schedule.programs[0].tbs[0].send_peer, -1);
  EXPECT_EQ(schedule.programs[0].tbs[0].recv_peer, -1);
  EXPECT_EQ(schedule.programs[0].tbs[0].channel, 0);
}

TEST(ScheduleJsonErrors, SyntaxErrorHasLineAndColumn) {
  const support::InputError e =
      json_error("{\n  \"format\": \"optiflow-schedule\",\n  \"ranks\": ]\n}");
  EXPECT_EQ(e.where().file, "bad.json");
  EXPECT_EQ(e.where().line, 3);
  EXPECT_EQ(e.where().column, 12);
  EXPECT_NE(std::string(e.what()).find("bad.json:3:12: error: invalid JSON"), std::string::npos)
      << e.what();
}

TEST(ScheduleJsonErrors, FieldsAreNamedByTheirPath) {
  struct Case {
    std::string from, to, field, message;
  };
  const Case cases[] = {
      {R"("type":"r","src":"o","src_off":2)", R"("type":"r","src":"o","src_off":-2)",
       "programs[0].tbs[1].steps[1].src_off", "out of range"},
      {R"("dst_off":1,"count":1})", R"("dst_off":1,"count":"one"})",
       "programs[0].tbs[1].steps[2].count", "must be an integer"},
      {R"({"type":"r","src":"o","src_off":3)", R"({"type":"recv","src":"o","src_off":3)",
       "programs[0].tbs[1].steps[0].type", "unknown name 'recv'"},
      {R"("src":"o","src_off":0,"dst":"o")", R"("src":"x","src_off":0,"dst":"o")",
       "programs[0].tbs[0].steps[0].src", "unknown name 'x' (i|o|s)"},
      {R"("deps":[[1,0]])", R"("deps":[[1]])", "programs[0].tbs[0].steps[1].deps[0]",
       "must be a pair"},
      {R"("route":[0,1])", R"("route":[0,-1])", "programs[0].tbs[0].steps[0].route[1]",
       "out of range"},
      {R"("rank":2)", R"("rank":5)", "programs[2].rank", "must be 2"},
      {R"("ranks": 4)", R"("ranks": 3)", "programs", "has 4 entries for 3 ranks"},
      {R"("collective": "allgather")", R"("collective": "gather")", "collective",
       "unknown name 'gather'"},
      {R"("protocol": "LL")", R"("protocol": "ll")", "protocol", "unknown protocol 'll'"},
      {R"("inplace": true)", R"("inplace": 1)", "inplace", "must be true or false"},
      {R"("format": "optiflow-schedule")", R"("format": "optiflow-topology")", "format",
       "is this a schedule file?"},
      {R"("version": 1)", R"("version": 2)", "version", "reads version 1"},
      {R"("output_chunks":4,)", "", "programs[0].output_chunks", "missing"},
      {R"("steps":[)", R"("steps":{"a":1},"x":[)", "programs[0].tbs[0].steps", "must be an array"},
  };
  for (const Case& c : cases) {
    SCOPED_TRACE(c.to);
    const support::InputError e = json_error(ring_json_with(c.from, c.to));
    EXPECT_EQ(e.where().file, "bad.json");
    EXPECT_EQ(e.where().field, c.field);
    EXPECT_NE(std::string(e.what()).find(c.message), std::string::npos) << e.what();
  }
}

class ScheduleFileTest : public ::testing::Test {
 protected:
  void SetUp() override {
    dir_ = std::filesystem::temp_directory_path() /
           ("optiflow_schedule_io_" + std::to_string(::getpid()));
    std::filesystem::create_directories(dir_);
  }
  void TearDown() override { std::filesystem::remove_all(dir_); }
  std::string write(const std::string& name, const std::string& text) {
    const std::filesystem::path path = dir_ / name;
    std::ofstream(path, std::ios::binary) << text;
    return path.string();
  }
  std::filesystem::path dir_;
};

TEST_F(ScheduleFileTest, DispatchesOnTheFirstCharacter) {
  const Schedule ring = ring_allgather(4);
  EXPECT_EQ(read_schedule_file(write("ring.json", write_schedule_json(ring))), ring);
  // The extension does not matter, the content does; leading blanks and a BOM are skipped.
  EXPECT_EQ(read_schedule_file(write("ring.txt", "\xEF\xBB\xBF \n" + write_msccl_xml(ring))), ring);
}

TEST_F(ScheduleFileTest, ErrorsNameTheFile) {
  const std::string path = write("broken.json", "{\"format\": \"optiflow-schedule\"}");
  try {
    read_schedule_file(path);
    FAIL() << "no error";
  } catch (const support::InputError& e) {
    EXPECT_EQ(e.where().file, path);
    EXPECT_EQ(e.where().field, "collective");
  }
  try {
    read_schedule_file((dir_ / "absent.json").string());
    FAIL() << "no error";
  } catch (const support::InputError& e) {
    EXPECT_NE(std::string(e.what()).find("cannot open file"), std::string::npos);
  }
}

}  // namespace
}  // namespace optiflow::schedule
