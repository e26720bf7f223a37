// MSCCL algorithm XML: export of schedules, and import of what msccl-executor-nccl runs and
// MSCCLang, TACCL and TE-CCL write. Conventions checked against msccl-executor-nccl
// (src/misc/msccl/msccl_parser.cc), msccl-tools (msccl/language/ir.py ir_to_xml) and TACCL
// (taccl/ncclize.py).
#include "optiflow/schedule/msccl_xml.hpp"

#include <tinyxml2.h>

#include <algorithm>
#include <cctype>
#include <charconv>
#include <filesystem>
#include <limits>
#include <optional>
#include <set>
#include <sstream>

#include "optiflow/support/error.hpp"
#include "optiflow/support/parse_support.hpp"
#include "optiflow/support/text_file.hpp"
#include "optiflow/support/xml_attributes.hpp"
#include "optiflow/topology/protocol.hpp"

namespace optiflow::schedule {
namespace {

using tinyxml2::XMLElement;

constexpr std::int64_t kInt32Max = std::numeric_limits<std::int32_t>::max();

// Which of its buffers a step reads or writes (docs/schedule-ir.md). MSCCL writes -1 as the
// offset of the others, e.g. on nops.
struct StepSides {
  StepKind kind;
  bool src, dst;
};
constexpr StepSides kSides[] = {
    {StepKind::send, true, false},
    {StepKind::recv, false, true},
    {StepKind::recv_copy_send, false, true},
    {StepKind::recv_reduce_copy, true, true},
    {StepKind::recv_reduce_send, true, false},
    {StepKind::recv_reduce_copy_send, true, true},
    {StepKind::copy, true, true},
    {StepKind::reduce, true, true},
    {StepKind::nop, false, false},
};

StepSides sides(StepKind kind) {
  for (const StepSides& entry : kSides)
    if (entry.kind == kind) return entry;
  return {kind, true, true};
}

// MSCCL's "no buffer" offset, written on dependency-only nops (ir_to_xml, ncclize).
constexpr std::int32_t kNoOffset = -1;

// ---------------------------------------------------------------------------------------------
// Export

constexpr std::pair<char, std::string_view> kEntities[] = {
    {'&', "&amp;"}, {'<', "&lt;"}, {'>', "&gt;"}, {'"', "&quot;"}};

std::string escape(std::string_view text) {
  std::string out;
  for (char c : text) {
    const auto* entity = std::find_if(std::begin(kEntities), std::end(kEntities),
                                      [c](const auto& e) { return e.first == c; });
    if (entity != std::end(kEntities))
      out += entity->second;
    else
      out += c;
  }
  return out;
}

std::string attr(std::string_view name, const std::string& value) {
  return " " + std::string(name) + "=\"" + value + "\"";
}
std::string attr(std::string_view name, std::int64_t value) {
  return attr(name, std::to_string(value));
}

// The XML index of each step once the dependency nops are in front of it.
std::vector<std::vector<std::int32_t>> xml_indices(const RankProgram& program) {
  std::vector<std::vector<std::int32_t>> indices;
  for (const ThreadBlock& tb : program.tbs) {
    std::int32_t next = 0;
    auto& of_tb = indices.emplace_back();
    for (const Step& step : tb.steps) {
      next += std::max<std::int32_t>(0, static_cast<std::int32_t>(step.deps.size()) - 1);
      of_tb.push_back(next++);
    }
  }
  return indices;
}

// Writes one program's <gpu>, expanding multiple dependencies into nops.
class GpuWriter {
 public:
  explicit GpuWriter(const RankProgram& program)
      : program_(program), indices_(xml_indices(program)) {
    for (const ThreadBlock& tb : program.tbs)
      for (const Step& step : tb.steps) dependents_.insert(step.deps.begin(), step.deps.end());
  }

  void write(std::string& out, std::size_t rank) const {
    out += "  <gpu" + attr("id", static_cast<std::int64_t>(rank)) +
           attr("i_chunks", program_.input_chunks) + attr("o_chunks", program_.output_chunks) +
           attr("s_chunks", program_.scratch_chunks) + ">\n";
    for (std::size_t t = 0; t < program_.tbs.size(); ++t) {
      const ThreadBlock& tb = program_.tbs[t];
      out += "    <tb" + attr("id", static_cast<std::int64_t>(t)) + attr("send", tb.send_peer) +
             attr("recv", tb.recv_peer) + attr("chan", tb.channel) + ">\n";
      std::int32_t index = 0;
      for (std::size_t s = 0; s < tb.steps.size(); ++s) {
        const Step& step = tb.steps[s];
        // MSCCLang's order: the step keeps its first dependency, nops carry the others.
        for (std::size_t d = 1; d < step.deps.size(); ++d)
          write_step(out, index++, dependency_nop(), xml_ref(step.deps[d]), false);
        const std::optional<StepRef> first =
            step.deps.empty() ? std::nullopt : std::optional(xml_ref(step.deps.front()));
        const StepRef self{static_cast<std::int32_t>(t), static_cast<std::int32_t>(s)};
        write_step(out, index++, step, first, dependents_.contains(self));
      }
      out += "    </tb>\n";
    }
    out += "  </gpu>\n";
  }

 private:
  static Step dependency_nop() {
    return Step{
        StepKind::nop, BufferKind::input, kNoOffset, BufferKind::output, kNoOffset, 0, {}, {}};
  }
  // References to steps that do not exist (the verifier's to report) are written unchanged.
  StepRef xml_ref(StepRef ref) const {
    const bool exists = ref.tb >= 0 && static_cast<std::size_t>(ref.tb) < indices_.size() &&
                        ref.step >= 0 &&
                        static_cast<std::size_t>(ref.step) < indices_[ref.tb].size();
    return exists ? StepRef{ref.tb, indices_[ref.tb][ref.step]} : ref;
  }
  static void write_step(std::string& out, std::int32_t index, const Step& step,
                         std::optional<StepRef> dep, bool has_dependents) {
    out += "      <step" + attr("s", index) + attr("type", std::string(to_string(step.kind))) +
           attr("srcbuf", std::string(to_string(step.src_buf))) + attr("srcoff", step.src_off) +
           attr("dstbuf", std::string(to_string(step.dst_buf))) + attr("dstoff", step.dst_off) +
           attr("cnt", step.count) + attr("depid", dep ? dep->tb : -1) +
           attr("deps", dep ? dep->step : -1) + attr("hasdep", has_dependents ? 1 : 0);
    if (!step.route.empty()) {
      std::string links;
      for (topology::LinkId link : step.route)
        links += (links.empty() ? "" : ",") + std::to_string(link);
      out += attr("route", links);
    }
    out += "/>\n";
  }

  const RankProgram& program_;
  std::vector<std::vector<std::int32_t>> indices_;
  std::set<StepRef> dependents_;
};

std::int32_t channel_count(const Schedule& schedule) {
  std::int32_t channels = 0;
  for (const RankProgram& program : schedule.programs)
    for (const ThreadBlock& tb : program.tbs) channels = std::max(channels, tb.channel + 1);
  return channels;
}

// ---------------------------------------------------------------------------------------------
// Import

using support::parse_integer;
using support::trim;

constexpr support::XmlAttributes::Key kElementKeys[] = {{"gpu", "id"}, {"tb", "id"}, {"step", "s"}};

// The attribute reader, which also names the <gpu> and <tb> being read in every message.
class XmlReader : public support::XmlAttributes {
 public:
  explicit XmlReader(const std::string& source) : XmlAttributes(source, kElementKeys) {}

  int gpu() const { return gpu_; }
  void set_gpu(int gpu) { place(gpu, -1); }
  void set_tb(int tb) { place(gpu_, tb); }

  std::int64_t integer(const XMLElement& e, const char* attribute, std::int64_t min,
                       std::int64_t max = kInt32Max) const {
    return XmlAttributes::integer(e, attribute, min, max);
  }
  std::int32_t int32(const XMLElement& e, const char* attribute, std::int64_t min) const {
    return static_cast<std::int32_t>(integer(e, attribute, min));
  }

 private:
  void place(int gpu, int tb) {
    gpu_ = gpu;
    std::string text;
    if (gpu >= 0) text = "gpu " + std::to_string(gpu);
    if (tb >= 0) text += ", tb " + std::to_string(tb);
    set_place(std::move(text));
  }
  int gpu_ = -1;
};

// A step as written, before its dependency is checked and the dependency nops are folded.
struct XmlStep {
  Step step;
  std::optional<StepRef> dep;  // XML indices
  bool dependency_only = false;
  const XMLElement* element = nullptr;
};
struct XmlTb {
  ThreadBlock tb;  // without steps
  std::vector<XmlStep> steps;
  const XMLElement* element = nullptr;
};

// A buffer offset; -1 (MSCCL's "none") is accepted and read as 0 where the step does not use it.
std::int32_t read_offset(const XmlReader& xml, const XMLElement& e, const char* attribute,
                         bool used, StepKind kind) {
  const std::int32_t offset = xml.int32(e, attribute, kNoOffset);
  if (offset == kNoOffset && used)
    xml.fail(e, attribute, "must be >= 0 for a '" + std::string(to_string(kind)) + "' step");
  return std::max(offset, 0);
}

std::vector<topology::LinkId> read_route(const XmlReader& xml, const XMLElement& e) {
  std::vector<topology::LinkId> route;
  const auto text = xml.text(e, "route");
  if (!text || text->empty()) return route;
  std::string_view rest = *text;
  while (true) {
    const auto comma = rest.find(',');
    const std::string_view item = trim(rest.substr(0, comma));
    const auto link = parse_integer(item);
    if (!link || *link < 0 || *link > std::numeric_limits<topology::LinkId>::max())
      xml.fail(e, "route", "'" + std::string(item) + "' is not a link id (route=\"3,17\")");
    route.push_back(static_cast<topology::LinkId>(*link));
    if (comma == std::string_view::npos) return route;
    rest.remove_prefix(comma + 1);
  }
}

XmlStep read_step(const XmlReader& xml, const XMLElement& e, std::size_t index) {
  static constexpr std::string_view kStepNames = "s|r|rcs|rrc|rrs|rrcs|cpy|re|nop";
  if (xml.integer(e, "s", 0) != static_cast<std::int64_t>(index))
    xml.fail(e, "s",
             "must be " + std::to_string(index) + ": steps are numbered 0, 1, 2, ... in order");
  XmlStep raw;
  raw.element = &e;
  Step& step = raw.step;
  step.kind = xml.name(e, "type", step_kind_from_string, kStepNames);
  step.src_buf = xml.name(e, "srcbuf", buffer_kind_from_string, "i|o|s");
  step.dst_buf = xml.name(e, "dstbuf", buffer_kind_from_string, "i|o|s");
  const StepSides used = sides(step.kind);
  step.src_off = read_offset(xml, e, "srcoff", used.src, step.kind);
  step.dst_off = read_offset(xml, e, "dstoff", used.dst, step.kind);
  step.count = xml.int32(e, "cnt", 0);
  step.route = read_route(xml, e);
  const std::int32_t depid = xml.int32(e, "depid", -1);
  const std::int32_t deps = xml.int32(e, "deps", -1);
  if (depid >= 0 && deps < 0)
    xml.fail(e, "deps", "must name a step of thread block " + std::to_string(depid));
  if (depid >= 0) raw.dep = StepRef{depid, deps};
  raw.dependency_only = step.kind == StepKind::nop && raw.dep && step.count == 0 &&
                        xml.integer(e, "srcoff", kNoOffset) == kNoOffset &&
                        xml.integer(e, "dstoff", kNoOffset) == kNoOffset;
  return raw;
}

XmlTb read_tb(XmlReader& xml, const XMLElement& e) {
  XmlTb raw;
  raw.element = &e;
  xml.set_tb(xml.int32(e, "id", 0));
  raw.tb.send_peer = xml.int32(e, "send", -1);
  raw.tb.recv_peer = xml.int32(e, "recv", -1);
  raw.tb.channel = xml.int32(e, "chan", 0);
  for (const XMLElement* child = e.FirstChildElement(); child;
       child = child->NextSiblingElement()) {
    if (std::string_view(child->Name()) != "step")
      xml.fail(*child, "", "unexpected element in <tb> (expected <step>, MSCCL's old_format)");
    raw.steps.push_back(read_step(xml, *child, raw.steps.size()));
  }
  xml.set_tb(-1);
  return raw;
}

// Whether copying input chunk `input_off` to output chunk `output_off` does nothing because the
// two are one memory under docs/schedule-ir.md's in-place aliasing.
bool aliased(const Schedule& schedule, std::int64_t rank, std::int64_t input_off,
             std::int64_t output_off) {
  if (!schedule.inplace) return false;
  const std::int64_t slice = schedule.chunks / schedule.ranks;
  switch (schedule.collective) {
    case support::Collective::all_gather:
      return output_off == rank * slice + input_off;
    case support::Collective::reduce_scatter:
      return input_off == rank * slice + output_off;
    case support::Collective::all_reduce:
      return input_off == output_off;
    default:
      return false;
  }
}

// TACCL's and TE-CCL's <copy i_off o_off/>: the input chunk is copied to the output before the
// algorithm starts. Only the copies that in-place aliasing makes no-ops can be dropped.
void check_copy(const XmlReader& xml, const XMLElement& e, const Schedule& schedule) {
  const std::int64_t input_off = xml.integer(e, "i_off", 0);
  const std::int64_t output_off = xml.integer(e, "o_off", 0);
  if (!aliased(schedule, xml.gpu(), input_off, output_off))
    xml.fail(e, "",
             "copies input chunk " + std::to_string(input_off) + " to output chunk " +
                 std::to_string(output_off) +
                 ", which is not the same memory under in-place aliasing; other <copy> elements "
                 "are not supported yet");
}

// Orders the thread blocks by id, which must be 0, 1, ... as the executor requires, and checks
// that every dependency names an existing step.
std::vector<XmlTb> arrange_tbs(XmlReader& xml, std::vector<XmlTb> tbs) {
  std::vector<XmlTb> by_id(tbs.size());
  for (XmlTb& raw : tbs) {
    const std::int64_t id = xml.integer(*raw.element, "id", 0);
    if (id >= static_cast<std::int64_t>(by_id.size()) || by_id[id].element)
      xml.fail(*raw.element, "id",
               id < static_cast<std::int64_t>(by_id.size())
                   ? "duplicate thread block id"
                   : "thread block ids must be 0.." + std::to_string(by_id.size() - 1));
    by_id[id] = std::move(raw);
  }
  for (std::size_t t = 0; t < by_id.size(); ++t) {
    xml.set_tb(static_cast<int>(t));
    for (const XmlStep& raw : by_id[t].steps) {
      if (!raw.dep) continue;
      if (static_cast<std::size_t>(raw.dep->tb) >= by_id.size())
        xml.fail(*raw.element, "depid",
                 "no thread block " + std::to_string(raw.dep->tb) + " on this gpu");
      if (static_cast<std::size_t>(raw.dep->step) >= by_id[raw.dep->tb].steps.size())
        xml.fail(*raw.element, "deps",
                 "thread block " + std::to_string(raw.dep->tb) + " has no step " +
                     std::to_string(raw.dep->step));
    }
  }
  xml.set_tb(-1);
  return by_id;
}

// Folds dependency-only nops into the next step of their thread block, which then waits for
// their dependencies too (the executor itself attaches a nop's dependency to the next step), and
// renumbers every reference. A nop that some step depends on, or that ends its thread block,
// stays: folding it would change what its dependents wait for.
std::vector<ThreadBlock> fold_nops(const std::vector<XmlTb>& tbs) {
  std::set<StepRef> referenced;
  for (const XmlTb& raw : tbs)
    for (const XmlStep& step : raw.steps)
      if (step.dep) referenced.insert(*step.dep);
  std::vector<std::vector<std::int32_t>> new_index(tbs.size());  // -1: folded
  for (std::size_t t = 0; t < tbs.size(); ++t) {
    std::int32_t next = 0;
    for (std::size_t s = 0; s < tbs[t].steps.size(); ++s) {
      const StepRef self{static_cast<std::int32_t>(t), static_cast<std::int32_t>(s)};
      const bool folded = tbs[t].steps[s].dependency_only && !referenced.contains(self) &&
                          s + 1 < tbs[t].steps.size();
      new_index[t].push_back(folded ? -1 : next++);
    }
  }
  std::vector<ThreadBlock> out;
  for (std::size_t t = 0; t < tbs.size(); ++t) {
    ThreadBlock tb = tbs[t].tb;
    std::vector<StepRef> pending;
    for (std::size_t s = 0; s < tbs[t].steps.size(); ++s) {
      const XmlStep& raw = tbs[t].steps[s];
      std::optional<StepRef> dep;
      if (raw.dep) dep = StepRef{raw.dep->tb, new_index[raw.dep->tb][raw.dep->step]};
      if (new_index[t][s] < 0) {
        pending.push_back(*dep);
        continue;
      }
      Step step = raw.step;
      if (dep) step.deps.push_back(*dep);
      step.deps.insert(step.deps.end(), pending.begin(), pending.end());
      pending.clear();
      tb.steps.push_back(std::move(step));
    }
    out.push_back(std::move(tb));
  }
  return out;
}

RankProgram read_gpu(XmlReader& xml, const XMLElement& e, const Schedule& schedule) {
  RankProgram program;
  program.input_chunks = xml.int32(e, "i_chunks", 0);
  program.output_chunks = xml.int32(e, "o_chunks", 0);
  program.scratch_chunks = xml.int32(e, "s_chunks", 0);
  std::vector<XmlTb> tbs;
  for (const XMLElement* child = e.FirstChildElement(); child;
       child = child->NextSiblingElement()) {
    const std::string_view name = child->Name();
    if (name == "tb")
      tbs.push_back(read_tb(xml, *child));
    else if (name == "copy")
      check_copy(xml, *child, schedule);
    else
      xml.fail(*child, "", "unexpected element in <gpu> (expected <tb> or <copy>)");
  }
  program.tbs = fold_nops(arrange_tbs(xml, std::move(tbs)));
  return program;
}

// "LL:131072 LL128:1048576": protocol and largest size of each range, ascending.
std::vector<ProtocolRange> read_protocol_ranges(const XmlReader& xml, const XMLElement& algo,
                                                std::string_view text) {
  std::vector<ProtocolRange> ranges;
  std::istringstream words{std::string(text)};
  for (std::string word; words >> word;) {
    const std::size_t colon = std::min(word.find(':'), word.size());
    ProtocolRange range{0, word.substr(0, colon)};
    const char* end = word.data() + word.size();
    const bool number = colon < word.size() &&
                        std::from_chars(word.data() + colon + 1, end, range.max_bytes).ptr == end;
    if (!number || !is_msccl_protocol(range.protocol) || range.max_bytes == 0 ||
        (!ranges.empty() && range.max_bytes <= ranges.back().max_bytes))
      xml.fail(algo, "protocol_by_size",
               "'" + word + "' is not PROTOCOL:MAX_BYTES (Simple|LL|LL128, sizes ascending)");
    ranges.push_back(std::move(range));
  }
  return ranges;
}

Schedule read_algo(const XmlReader& xml, const XMLElement& algo) {
  Schedule schedule;
  const char* name = algo.Attribute("name");
  schedule.name =
      support::valid_utf8(name ? name : std::filesystem::path(xml.source()).stem().string());
  schedule.protocol = std::string(xml.required(algo, "proto"));
  if (!is_msccl_protocol(schedule.protocol))
    xml.fail(algo, "proto", "unknown protocol '" + schedule.protocol + "' (Simple|LL|LL128)");
  schedule.collective = xml.name(algo, "coll", support::collective_from_string,
                                 "allgather|reducescatter|allreduce|broadcast|reduce|alltoall");
  schedule.ranks = xml.int32(algo, "ngpus", 1);
  schedule.chunks = xml.int32(algo, "nchunksperloop", 1);
  schedule.inplace = xml.integer(algo, "inplace", 0, 1) == 1;
  if (const char* topology = algo.Attribute("topology"))
    schedule.topology = support::valid_utf8(topology);
  if (const char* ranges = algo.Attribute("protocol_by_size"))
    schedule.protocol_by_size = read_protocol_ranges(xml, algo, ranges);
  return schedule;
}

// The <gpu> elements by id, checked to be 0..ngpus-1 each once before any is read.
std::vector<const XMLElement*> gpus_by_id(const XmlReader& xml, const XMLElement& algo,
                                          std::int32_t ranks) {
  std::vector<const XMLElement*> by_id(static_cast<std::size_t>(ranks), nullptr);
  for (const XMLElement* e = algo.FirstChildElement(); e; e = e->NextSiblingElement()) {
    if (std::string_view(e->Name()) != "gpu")
      xml.fail(*e, "", "unexpected element in <algo> (expected <gpu>)");
    const std::int64_t id = xml.integer(*e, "id", 0, ranks - 1);
    if (by_id[id]) xml.fail(*e, "id", "duplicate gpu id");
    by_id[id] = e;
  }
  for (std::size_t rank = 0; rank < by_id.size(); ++rank)
    if (!by_id[rank])
      xml.fail(algo, "ngpus",
               "is " + std::to_string(ranks) + " but there is no <gpu id=\"" +
                   std::to_string(rank) + "\">");
  return by_id;
}

void read_gpus(XmlReader& xml, const XMLElement& algo, Schedule& schedule) {
  for (const XMLElement* gpu : gpus_by_id(xml, algo, schedule.ranks)) {
    xml.set_gpu(static_cast<int>(schedule.programs.size()));
    schedule.programs.push_back(read_gpu(xml, *gpu, schedule));
  }
  xml.set_gpu(-1);
}

}  // namespace

bool is_msccl_protocol(std::string_view name) {
  return topology::protocol_from_string(name).has_value();
}

std::string write_msccl_xml(const Schedule& schedule, const MscclExportOptions& options) {
  std::string out =
      "<algo" + attr("name", escape(schedule.name)) +
      // MSCCL runs one protocol per file: the one chosen for the file's largest size.
      attr("proto",
           escape(std::string(options.max_bytes > 0 ? schedule.protocol_for(options.max_bytes)
                                                    : std::string_view(schedule.protocol)))) +
      attr("nchannels", channel_count(schedule)) + attr("nchunksperloop", schedule.chunks) +
      attr("ngpus", schedule.ranks) + attr("coll", std::string(to_string(schedule.collective))) +
      attr("inplace", schedule.inplace ? 1 : 0) +
      attr("outofplace", options.outofplace || !schedule.inplace ? 1 : 0);
  if (options.max_bytes > 0)
    out += attr("minBytes", std::to_string(options.min_bytes)) +
           attr("maxBytes", std::to_string(options.max_bytes));
  // OptiFlow's own attributes, which MSCCL ignores: the topology the routes refer to, and the
  // protocol the compiler chose for smaller sizes (MSCCL runs one protocol per file: `proto`).
  if (!schedule.topology.empty()) out += attr("topology", escape(schedule.topology));
  if (!schedule.protocol_by_size.empty()) {
    std::string ranges;
    for (const ProtocolRange& range : schedule.protocol_by_size)
      ranges +=
          (ranges.empty() ? "" : " ") + range.protocol + ":" + std::to_string(range.max_bytes);
    out += attr("protocol_by_size", escape(ranges));
  }
  out += ">\n";
  for (std::size_t rank = 0; rank < schedule.programs.size(); ++rank)
    GpuWriter(schedule.programs[rank]).write(out, rank);
  out += "</algo>\n";
  return out;
}

Schedule parse_msccl_xml(std::string_view xml_text, const std::string& source) {
  tinyxml2::XMLDocument doc;
  if (doc.Parse(xml_text.data(), xml_text.size()) != tinyxml2::XML_SUCCESS)
    throw support::InputError(support::SourceLocation{source, doc.ErrorLineNum(), 0, {}},
                              support::xml_error_message(doc));
  const XMLElement* algo = doc.RootElement();
  if (!algo || std::string_view(algo->Name()) != "algo")
    throw support::InputError(support::SourceLocation{source, algo ? algo->GetLineNum() : 0, 0, {}},
                              "not an MSCCL algorithm: the root element must be <algo>");
  XmlReader xml(source);
  Schedule schedule = read_algo(xml, *algo);
  read_gpus(xml, *algo, schedule);
  return schedule;
}

Schedule read_msccl_xml_file(const std::string& path) {
  return parse_msccl_xml(support::read_text_file(path), path);
}

}  // namespace optiflow::schedule
