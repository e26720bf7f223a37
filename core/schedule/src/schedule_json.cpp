// The schedule JSON format (docs/formats.md): writer, structural reader, and the file reader that
// also accepts MSCCL XML.
#include <array>
#include <charconv>
#include <cstdint>
#include <filesystem>
#include <limits>
#include <nlohmann/json.hpp>

#include "optiflow/schedule/msccl_xml.hpp"
#include "optiflow/schedule/schedule_io.hpp"
#include "optiflow/support/error.hpp"
#include "optiflow/support/hash.hpp"
#include "optiflow/support/parse_support.hpp"
#include "optiflow/support/text_file.hpp"

namespace optiflow::schedule {
namespace {

using nlohmann::json;
using nlohmann::ordered_json;

constexpr std::string_view kFormat = "optiflow-schedule";
constexpr int kVersion = 1;
constexpr std::int64_t kInt32Max = std::numeric_limits<std::int32_t>::max();
constexpr std::int64_t kLinkIdMax = std::numeric_limits<topology::LinkId>::max();

// ---------------------------------------------------------------------------------------------
// Writing

// Where the JSON text goes: into a string, or only into a hash of it (content_hash without
// the text).
class JsonOut {
 public:
  explicit JsonOut(std::string* text) : text_(text) {}
  explicit JsonOut(support::ContentHasher* hasher) : hasher_(hasher) {}

  JsonOut& operator<<(std::string_view bytes) {
    if (text_) text_->append(bytes);
    if (hasher_) hasher_->update(bytes);
    return *this;
  }
  JsonOut& operator<<(std::int64_t value) {
    std::array<char, 24> digits{};
    const auto end = std::to_chars(digits.data(), digits.data() + digits.size(), value).ptr;
    return *this << std::string_view(digits.data(), static_cast<std::size_t>(end - digits.data()));
  }
  JsonOut& indent(int depth) {
    static constexpr std::string_view kSpaces = "          ";
    return *this << kSpaces.substr(0, static_cast<std::size_t>(2 * depth));
  }

 private:
  std::string* text_ = nullptr;
  support::ContentHasher* hasher_ = nullptr;
};

std::string dump(const ordered_json& value) {
  return value.dump(-1, ' ', false, nlohmann::json::error_handler_t::replace);
}

// The same text nlohmann would print for {"type":..., ..., "deps":[[tb,step]], "route":[...]},
// written directly: a schedule has millions of steps.
void write_step(JsonOut& out, const Step& step) {
  out << R"({"type":")" << to_string(step.kind) << R"(","src":")" << to_string(step.src_buf)
      << R"(","src_off":)" << std::int64_t{step.src_off} << R"(,"dst":")" << to_string(step.dst_buf)
      << R"(","dst_off":)" << std::int64_t{step.dst_off} << R"(,"count":)"
      << std::int64_t{step.count};
  if (!step.deps.empty()) {
    out << R"(,"deps":[)";
    for (std::size_t i = 0; i < step.deps.size(); ++i)
      out << (i ? ",[" : "[") << std::int64_t{step.deps[i].tb} << ","
          << std::int64_t{step.deps[i].step} << "]";
    out << "]";
  }
  if (!step.route.empty()) {
    out << R"(,"route":[)";
    for (std::size_t i = 0; i < step.route.size(); ++i)
      out << (i ? "," : "") << std::int64_t{step.route[i]};
    out << "]";
  }
  out << "}";
}

// Closes a list whose items each began on a new line at `depth` + 1.
void close_list(JsonOut& out, bool empty, int depth) {
  if (!empty) (out << "\n").indent(depth);
  out << "]";
}

void write_tb(JsonOut& out, const ThreadBlock& tb) {
  out.indent(3) << R"({"send":)" << std::int64_t{tb.send_peer} << R"(,"recv":)"
                << std::int64_t{tb.recv_peer} << R"(,"channel":)" << std::int64_t{tb.channel}
                << R"(,"steps":[)";
  for (std::size_t i = 0; i < tb.steps.size(); ++i) {
    out << (i ? ",\n" : "\n");
    out.indent(4);
    write_step(out, tb.steps[i]);
  }
  close_list(out, tb.steps.empty(), 3);
  out << "}";
}

void write_program(JsonOut& out, const RankProgram& program, std::size_t rank) {
  out.indent(2) << R"({"rank":)" << static_cast<std::int64_t>(rank) << R"(,"input_chunks":)"
                << std::int64_t{program.input_chunks} << R"(,"output_chunks":)"
                << std::int64_t{program.output_chunks} << R"(,"scratch_chunks":)"
                << std::int64_t{program.scratch_chunks} << R"(,"tbs":[)";
  for (std::size_t i = 0; i < program.tbs.size(); ++i) {
    out << (i ? ",\n" : "\n");
    write_tb(out, program.tbs[i]);
  }
  close_list(out, program.tbs.empty(), 2);
  out << "}";
}

// Indented down to the thread blocks, one line per step: schedules run to thousands of steps,
// and a step per line keeps them readable and diffable.
void write_schedule(JsonOut& out, const Schedule& schedule) {
  const ordered_json head{
      {"format", std::string(kFormat)}, {"version", kVersion},
      {"name", schedule.name},          {"collective", std::string(to_string(schedule.collective))},
      {"ranks", schedule.ranks},        {"chunks", schedule.chunks},
      {"protocol", schedule.protocol},  {"inplace", schedule.inplace},
      {"topology", schedule.topology}};
  ordered_json ranges = ordered_json::array();
  for (const ProtocolRange& range : schedule.protocol_by_size)
    ranges.push_back(ordered_json{{"max_bytes", range.max_bytes}, {"protocol", range.protocol}});
  out << "{\n";
  for (const auto& [key, value] : head.items())
    out.indent(1) << dump(json(key)) << ": " << dump(value) << ",\n";
  if (!ranges.empty()) out.indent(1) << "\"protocol_by_size\": " << dump(ranges) << ",\n";
  out.indent(1) << "\"programs\": [";
  for (std::size_t rank = 0; rank < schedule.programs.size(); ++rank) {
    out << (rank ? ",\n" : "\n");
    write_program(out, schedule.programs[rank], rank);
  }
  close_list(out, schedule.programs.empty(), 1);
  out << "\n}\n";
}

// ---------------------------------------------------------------------------------------------
// Reading

std::string item(const std::string& path, std::size_t index) {
  return path + "[" + std::to_string(index) + "]";
}

template <class Enum>
Enum enum_field(const support::FieldReader& r, const char* key,
                std::optional<Enum> (*from_string)(std::string_view), std::string_view names) {
  const std::string name = r.string(key);
  const auto value = from_string(name);
  if (!value) r.fail(r.field(key), "unknown name '" + name + "' (" + std::string(names) + ")");
  return *value;
}

std::vector<StepRef> read_deps(const support::FieldReader& r) {
  std::vector<StepRef> deps;
  if (!r.has("deps")) return deps;
  const json& list = r.array("deps");
  for (std::size_t i = 0; i < list.size(); ++i) {
    const std::string at = item(r.field("deps"), i);
    if (!list[i].is_array() || list[i].size() != 2) r.fail(at, "must be a pair [tb, step]");
    deps.push_back(
        StepRef{static_cast<std::int32_t>(r.integer_value(list[i][0], at, 0, kInt32Max)),
                static_cast<std::int32_t>(r.integer_value(list[i][1], at, 0, kInt32Max))});
  }
  return deps;
}

std::vector<topology::LinkId> read_route(const support::FieldReader& r) {
  std::vector<topology::LinkId> route;
  if (!r.has("route")) return route;
  const json& list = r.array("route");
  for (std::size_t i = 0; i < list.size(); ++i)
    route.push_back(static_cast<topology::LinkId>(
        r.integer_value(list[i], item(r.field("route"), i), 0, kLinkIdMax)));
  return route;
}

Step read_step(const support::FieldReader& r) {
  static constexpr std::string_view kStepNames = "s|r|rcs|rrc|rrs|rrcs|cpy|re|nop";
  static constexpr std::string_view kBufferNames = "i|o|s";
  Step step;
  step.kind = enum_field(r, "type", step_kind_from_string, kStepNames);
  step.src_buf = enum_field(r, "src", buffer_kind_from_string, kBufferNames);
  step.src_off = r.int32("src_off", 0);
  step.dst_buf = enum_field(r, "dst", buffer_kind_from_string, kBufferNames);
  step.dst_off = r.int32("dst_off", 0);
  step.count = r.int32("count", 0);
  step.deps = read_deps(r);
  step.route = read_route(r);
  return step;
}

ThreadBlock read_tb(const support::FieldReader& r) {
  ThreadBlock tb;
  tb.send_peer = r.int32_or("send", -1, -1);
  tb.recv_peer = r.int32_or("recv", -1, -1);
  tb.channel = r.int32_or("channel", 0, 0);
  const json& steps = r.array("steps");
  for (std::size_t i = 0; i < steps.size(); ++i)
    tb.steps.push_back(
        read_step(support::FieldReader(steps[i], item(r.field("steps"), i), r.source())));
  return tb;
}

RankProgram read_program(const support::FieldReader& r, std::size_t rank) {
  if (r.integer("rank", 0, kInt32Max) != static_cast<std::int64_t>(rank))
    r.fail(r.field("rank"),
           "must be " + std::to_string(rank) + ": programs are listed in rank order");
  RankProgram program;
  program.input_chunks = r.int32("input_chunks", 0);
  program.output_chunks = r.int32("output_chunks", 0);
  program.scratch_chunks = r.int32_or("scratch_chunks", 0, 0);
  const json& tbs = r.array("tbs");
  for (std::size_t i = 0; i < tbs.size(); ++i)
    program.tbs.push_back(
        read_tb(support::FieldReader(tbs[i], item(r.field("tbs"), i), r.source())));
  return program;
}

void check_header(const support::FieldReader& top) {
  if (top.string("format") != kFormat)
    top.fail("format", "must be \"" + std::string(kFormat) + "\" (is this a schedule file?)");
  if (top.has("version") && top.integer("version", 0, kInt32Max) != kVersion)
    top.fail("version", "this OptiFlow reads version " + std::to_string(kVersion));
}

std::string default_name(const std::string& source) {
  return std::filesystem::path(source).stem().string();
}

}  // namespace

std::string write_schedule_json(const Schedule& schedule) {
  std::string text;
  JsonOut out(&text);
  write_schedule(out, schedule);
  return text;
}

void read_protocol_ranges(const support::FieldReader& top, Schedule& schedule) {
  if (!top.has("protocol_by_size")) return;
  const json& ranges = top.array("protocol_by_size");
  for (std::size_t i = 0; i < ranges.size(); ++i) {
    const support::FieldReader range(ranges[i], item("protocol_by_size", i), top.source());
    ProtocolRange entry{static_cast<std::uint64_t>(range.integer(
                            "max_bytes", 1, std::numeric_limits<std::int64_t>::max())),
                        range.string("protocol")};
    if (!is_msccl_protocol(entry.protocol))
      range.fail(range.field("protocol"),
                 "unknown protocol '" + entry.protocol + "' (Simple|LL|LL128)");
    if (!schedule.protocol_by_size.empty() &&
        entry.max_bytes <= schedule.protocol_by_size.back().max_bytes)
      range.fail(range.field("max_bytes"), "must be larger than the previous range's");
    schedule.protocol_by_size.push_back(std::move(entry));
  }
}

std::string schedule_hash(const Schedule& schedule) {
  support::ContentHasher hasher;
  JsonOut out(&hasher);
  write_schedule(out, schedule);
  return hasher.hex();
}

Schedule parse_schedule_json(std::string_view text, const std::string& source) {
  const json doc = support::parse_json_text(text, source);
  const support::FieldReader top(doc, "", source);
  check_header(top);
  Schedule schedule;
  schedule.name = top.string_or("name", default_name(source));
  schedule.collective = enum_field(top, "collective", support::collective_from_string,
                                   "allgather|reducescatter|allreduce|broadcast|reduce|alltoall");
  schedule.ranks = top.int32("ranks", 1);
  schedule.chunks = top.int32("chunks", 1);
  schedule.protocol = top.string_or("protocol", schedule.protocol);
  if (!is_msccl_protocol(schedule.protocol))
    top.fail("protocol", "unknown protocol '" + schedule.protocol + "' (Simple|LL|LL128)");
  read_protocol_ranges(top, schedule);
  schedule.inplace = top.boolean("inplace");
  schedule.topology = top.string_or("topology", "");
  const json& programs = top.array("programs");
  if (programs.size() != static_cast<std::size_t>(schedule.ranks))
    top.fail("programs", "has " + std::to_string(programs.size()) + " entries for " +
                             std::to_string(schedule.ranks) + " ranks (one program per rank)");
  for (std::size_t rank = 0; rank < programs.size(); ++rank)
    schedule.programs.push_back(
        read_program(support::FieldReader(programs[rank], item("programs", rank), source), rank));
  return schedule;
}

Schedule read_schedule_file(const std::string& path) {
  const std::string text = support::read_text_file(path);
  std::string_view rest = text;
  if (rest.starts_with("\xEF\xBB\xBF")) rest.remove_prefix(3);  // a UTF-8 byte order mark
  const auto first = rest.find_first_not_of(" \t\r\n");
  if (first != std::string_view::npos && rest[first] == '<') return parse_msccl_xml(text, path);
  return parse_schedule_json(text, path);
}

}  // namespace optiflow::schedule
