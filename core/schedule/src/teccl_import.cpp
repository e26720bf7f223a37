// TE-CCL All-Gather schedules into the schedule IR. The topology tables below restate the
// figures of TE-CCL's teccl/topologies/*.py (microsoft/TE-CCL c128bf2); docs/teccl-import.md
// gives the conversions and the choices made where TE-CCL's model and our runtime differ.
#include "optiflow/schedule/teccl_import.hpp"

#include <algorithm>
#include <charconv>
#include <cstdio>
#include <map>
#include <nlohmann/json.hpp>
#include <optional>
#include <string_view>
#include <tuple>

#include "optiflow/schedule/epoch_transfers.hpp"
#include "optiflow/support/error.hpp"
#include "optiflow/support/parse_support.hpp"
#include "optiflow/support/text_file.hpp"
#include "optiflow/support/units.hpp"

namespace optiflow::schedule {
namespace {

using support::FieldReader;
using support::InputError;
using topology::LinkKind;

/// The solver input fields that shape the schedule, with TE-CCL's defaults (input_data.py).
struct TecclInput {
  std::string name;
  int chassis = 1;
  double chunk_size_GB = 1;
  double link_alpha_s = 0;  ///< TopologyParams.alpha[0], seconds
  int side_length = 4;
  int num_chunks = 1;
};

/// TE-CCL's topology as its capacity and alpha matrices describe it, in our units: an entry
/// with bw_GBps 0 is no link.
struct Fabric {
  struct Entry {
    double bw_GBps = 0;
    double alpha_us = 0;
    LinkKind kind = LinkKind::other;
  };
  std::string name;
  int gpu_sm = 0;
  std::vector<std::vector<Entry>> links;  ///< [from][to]
  std::vector<bool> is_switch;
  std::vector<int> host;  ///< chassis of each node

  explicit Fabric(int nodes)
      : links(static_cast<std::size_t>(nodes), std::vector<Entry>(static_cast<std::size_t>(nodes))),
        is_switch(static_cast<std::size_t>(nodes), false),
        host(static_cast<std::size_t>(nodes), 0) {}
  int size() const { return static_cast<int>(links.size()); }
  Entry& at(int from, int to) {
    return links[static_cast<std::size_t>(from)][static_cast<std::size_t>(to)];
  }
  const Entry& at(int from, int to) const {
    return links[static_cast<std::size_t>(from)][static_cast<std::size_t>(to)];
  }
};

TecclInput parse_input(std::string_view text, const std::string& path) {
  const nlohmann::json doc = support::parse_json_text(text, path);
  const FieldReader root(doc, "", path);
  const FieldReader topo(root.required("TopologyParams", "object"), "TopologyParams", path);
  const FieldReader instance(root.required("InstanceParams", "object"), "InstanceParams", path);
  TecclInput in;
  in.name = topo.string("name");
  // TE-CCL's fabrics are dense node-by-node matrices: past these sizes a file asks for more
  // memory than any of its inputs could mean (and side * side overflows an int).
  constexpr std::int64_t kMaxChassis = 128;
  constexpr std::int64_t kMaxSide = 32;
  if (topo.has("chassis")) in.chassis = static_cast<int>(topo.integer("chassis", 1, kMaxChassis));
  in.chunk_size_GB = topo.number_or("chunk_size", 1);
  if (in.chunk_size_GB <= 0) topo.fail(topo.field("chunk_size"), "must be a positive number (GB)");
  if (topo.has("side_length"))
    in.side_length = static_cast<int>(topo.integer("side_length", 1, kMaxSide));
  if (topo.has("alpha")) {
    const nlohmann::json& alpha = topo.array("alpha");
    if (alpha.empty() || !alpha[0].is_number() || alpha[0].get<double>() < 0)
      topo.fail(topo.field("alpha[0]"), "must be a link latency >= 0 (seconds)");
    in.link_alpha_s = alpha[0].get<double>();
  }
  if (instance.int32_or("collective", 1, 1) != 1)
    instance.fail(instance.field("collective"), "only 1 (AllGather) can be imported");
  in.num_chunks = instance.int32_or("num_chunks", 1, 1);
  return in;
}

// NDv2 (ndv2.py): TE-CCL's matrix codes 23, 46 and 107 are betas in us/MB; its conversion
// map turns them into 50, 25 and 12.5 GB/s, with alphas 0.7 us (NVLink) and 1.3 us (107).
Fabric::Entry ndv2_entry(int code) {
  switch (code) {
    case 23:
      return {50, 0.7, LinkKind::nvlink};
    case 46:
      return {25, 0.7, LinkKind::nvlink};
    case 107:
      return {12.5, 1.3, LinkKind::ib};
    default:
      return {};
  }
}

constexpr int kNdv2Chassis[8][8] = {{0, 23, 46, 46, 23, 0, 0, 0}, {23, 0, 46, 23, 0, 46, 0, 0},
                                    {46, 46, 0, 23, 0, 0, 23, 0}, {46, 23, 23, 0, 0, 0, 0, 46},
                                    {23, 0, 0, 0, 0, 23, 46, 46}, {0, 46, 0, 0, 23, 0, 46, 23},
                                    {0, 0, 23, 0, 46, 46, 0, 23}, {0, 0, 0, 46, 46, 23, 23, 0}};

// TE-CCL builds a row-major code matrix and then transposes it, so code[i][j] is the link
// j -> i. With 2 chassis it has no switch row yet still marks node 0 a switch
// (set_switch_indicies), so node 0 relays and has no demand: 15 GPUs. Reproduced as is, since
// its schedules are solved on exactly that model.
Fabric ndv2_fabric(int chassis) {
  const bool two = chassis == 2;
  const int offset = two ? 0 : 1;
  const int nodes = 8 * chassis + offset;
  std::vector<std::vector<int>> code(static_cast<std::size_t>(nodes),
                                     std::vector<int>(static_cast<std::size_t>(nodes), 0));
  auto set = [&](int i, int j, int value) {
    code[static_cast<std::size_t>(i)][static_cast<std::size_t>(j)] = value;
  };
  for (int c = 0; c < chassis; ++c)
    for (int i = 0; i < 8; ++i)
      for (int j = 0; j < 8; ++j) set(offset + 8 * c + i, offset + 8 * c + j, kNdv2Chassis[i][j]);
  if (two) {
    set(1, 8, 107);
    set(9, 0, 107);
  } else {
    for (int c = 0; c < chassis; ++c) {
      set(0, 8 * c + 1, 107);
      set(8 * c + 2, 0, 107);
    }
  }
  Fabric fabric(nodes);
  fabric.name = "teccl-ndv2x" + std::to_string(chassis);
  fabric.gpu_sm = 70;
  for (int i = 0; i < nodes; ++i)
    for (int j = 0; j < nodes; ++j)
      fabric.at(j, i) = ndv2_entry(code[static_cast<std::size_t>(i)][static_cast<std::size_t>(j)]);
  for (int n = 0; n < nodes; ++n) fabric.host[static_cast<std::size_t>(n)] = (n - offset) / 8;
  fabric.host[0] = 0;
  fabric.is_switch[0] = true;
  return fabric;
}

// DGX1 (dgx1.py): the hybrid cube-mesh, "speed" 25 GB/s per NVLink, doubled links 50 GB/s.
Fabric dgx1_fabric(const TecclInput& in) {
  constexpr int kLinks[8][8] = {{0, 2, 1, 1, 2, 0, 0, 0}, {2, 0, 1, 2, 0, 1, 0, 0},
                                {1, 1, 0, 2, 0, 0, 2, 0}, {1, 2, 2, 0, 0, 0, 0, 1},
                                {2, 0, 0, 0, 0, 2, 1, 1}, {0, 1, 0, 0, 2, 0, 1, 2},
                                {0, 0, 2, 0, 1, 1, 0, 2}, {0, 0, 0, 1, 1, 2, 2, 0}};
  Fabric fabric(8);
  fabric.name = "teccl-dgx1";
  fabric.gpu_sm = 70;
  for (int i = 0; i < 8; ++i)
    for (int j = 0; j < 8; ++j)
      if (kLinks[i][j] > 0)
        fabric.at(i, j) = {25.0 * kLinks[i][j], support::us_of_seconds(in.link_alpha_s),
                           LinkKind::nvlink};
  return fabric;
}

// DGX2 (dgx2.py): always 2 chassis of one NVSwitch (nodes 0 and 17) and 16 GPUs, 125 GB/s and
// 0.35 us each way; odd local GPU 2k+1 of each chassis sends to GPU 2k of the other at
// 12.5 GB/s and 2.6 us (TACCL's NIC mapping; node = 17 * chassis + 1 + local).
Fabric dgx2_fabric() {
  Fabric fabric(34);
  fabric.name = "teccl-dgx2x2";
  fabric.gpu_sm = 70;
  for (int c = 0; c < 2; ++c) {
    const int sw = 17 * c;
    fabric.is_switch[static_cast<std::size_t>(sw)] = true;
    for (int n = sw; n < sw + 17; ++n) fabric.host[static_cast<std::size_t>(n)] = c;
    for (int g = sw + 1; g < sw + 17; ++g) {
      fabric.at(sw, g) = {125, 0.35, LinkKind::nvswitch};
      fabric.at(g, sw) = {125, 0.35, LinkKind::nvswitch};
    }
  }
  for (int c = 0; c < 2; ++c)
    for (int local = 1; local < 16; local += 2)
      fabric.at(17 * c + 1 + local, 17 * (1 - c) + local) = {12.5, 2.6, LinkKind::ib};
  return fabric;
}

// AMD (amd.py), one chassis of 16 MI250 dies: weight w links at w * 50 GB/s. TE-CCL's
// multi-chassis AMD numbers its switches inconsistently with its matrix; not imported.
Fabric amd_fabric(const TecclInput& in) {
  const std::vector<std::vector<std::pair<int, int>>> adjacency = {
      {{1, 4}, {4, 2}, {8, 1}},
      {{0, 4}, {5, 1}, {9, 1}, {10, 1}},
      {{3, 4}, {6, 1}, {10, 1}, {9, 1}},
      {{2, 4}, {7, 2}, {11, 1}},
      {{6, 1}, {5, 4}, {0, 2}},
      {{1, 1}, {4, 4}, {7, 1}, {6, 1}},
      {{4, 1}, {7, 4}, {2, 1}, {5, 1}},
      {{5, 1}, {6, 4}, {3, 2}},
      {{0, 1}, {9, 4}, {12, 2}},
      {{1, 1}, {2, 1}, {8, 4}, {13, 1}},
      {{1, 1}, {2, 1}, {11, 4}, {14, 1}},
      {{3, 1}, {10, 4}, {15, 2}},
      {{8, 2}, {13, 4}, {14, 1}},
      {{9, 1}, {12, 4}, {15, 1}, {14, 1}},
      {{10, 1}, {12, 1}, {13, 1}, {15, 4}},
      {{11, 2}, {13, 1}, {14, 4}}};
  Fabric fabric(16);
  fabric.name = "teccl-amd";
  for (int i = 0; i < 16; ++i)
    for (const auto& [j, w] : adjacency[static_cast<std::size_t>(i)])
      fabric.at(i, j) = {50.0 * w, support::us_of_seconds(in.link_alpha_s), LinkKind::other};
  return fabric;
}

// Mesh (mesh.py): node i links to i +- 1 and i +- side at 100 GB/s. TE-CCL does not stop
// i +- 1 at a row's end, so the last node of a row links to the first of the next; its
// schedules use those links, so they are kept.
Fabric mesh_fabric(const TecclInput& in) {
  const int side = in.side_length;
  const int nodes = side * side;
  Fabric fabric(nodes);
  fabric.name = "teccl-mesh" + std::to_string(side) + "x" + std::to_string(side);
  for (int i = 0; i < nodes; ++i)
    for (int j = 0; j < nodes; ++j)
      if (j == i - 1 || j == i + 1 || j == i - side || j == i + side)
        fabric.at(i, j) = {100, support::us_of_seconds(in.link_alpha_s), LinkKind::other};
  return fabric;
}

Fabric build_fabric(const TecclInput& in, const std::string& input_path) {
  const auto fail = [&](const char* field, const std::string& message) {
    return InputError(support::SourceLocation{input_path, 0, 0, field}, message);
  };
  if (in.name == "NDv2") return ndv2_fabric(in.chassis);
  if (in.name == "DGX1") return dgx1_fabric(in);
  if (in.name == "DGX2") return dgx2_fabric();
  if (in.name == "Mesh") return mesh_fabric(in);
  if (in.name == "AMD") {
    if (in.chassis != 1)
      throw fail("TopologyParams.chassis", "only 1 chassis of AMD can be imported");
    return amd_fabric(in);
  }
  throw fail("TopologyParams.name", "unknown topology '" + in.name +
                                        "' (NDv2, DGX1, DGX2, AMD or Mesh, as TE-CCL names them)");
}

/// The topology, with node ids naming TE-CCL's node numbers; ranks in TE-CCL's GPU order.
struct BuiltTopology {
  topology::Topology topo;
  std::vector<int> rank_of_node;  ///< -1 for switches
  std::vector<int> node_of_rank;
  std::map<std::pair<int, int>, topology::LinkId> link_of;
};

BuiltTopology build_topology(const Fabric& fabric) {
  BuiltTopology built;
  built.topo.set_name(fabric.name);
  built.topo.set_gpu_sm(fabric.gpu_sm);
  built.rank_of_node.assign(static_cast<std::size_t>(fabric.size()), -1);
  std::map<int, int> gpus_in_host;
  for (int n = 0; n < fabric.size(); ++n) {
    topology::Node node;
    if (fabric.is_switch[static_cast<std::size_t>(n)]) {
      node.id = "sw" + std::to_string(n);
      node.kind = topology::NodeKind::switch_;
    } else {
      node.id = "gpu" + std::to_string(n);
      node.rank = static_cast<int>(built.node_of_rank.size());
      node.host = fabric.host[static_cast<std::size_t>(n)];
      node.local = gpus_in_host[node.host]++;
      built.rank_of_node[static_cast<std::size_t>(n)] = node.rank;
      built.node_of_rank.push_back(n);
    }
    built.topo.add_node(node);
  }
  // Each pair's two directions are added next to each other, so that the writer folds equal
  // ones into one bidirectional link and reading the file back gives the same link ids.
  const auto add = [&](int from, int to) {
    const Fabric::Entry& e = fabric.at(from, to);
    if (e.bw_GBps <= 0) return;
    built.link_of[{from, to}] =
        built.topo.add_link(static_cast<topology::NodeId>(from), static_cast<topology::NodeId>(to),
                            {e.kind, e.bw_GBps, e.alpha_us});
  };
  for (int i = 0; i < fabric.size(); ++i)
    for (int j = i + 1; j < fabric.size(); ++j) {
      add(i, j);
      add(j, i);
    }
  built.topo.validate(fabric.name);
  return built;
}

/// One entry of "7-Flows": "Chunk C from S traveled over I->J in epoch K[ via switches A -> B]".
struct Flow {
  int chunk = 0;
  int source = 0;
  std::vector<int> path;  ///< I, the switches, J
  int epoch = 0;
};

/// A cursor over a flow string that consumes literal words and integers.
class FlowLexer {
 public:
  explicit FlowLexer(std::string_view text) : rest_(text) {}
  bool literal(std::string_view word) {
    if (!rest_.starts_with(word)) return false;
    rest_.remove_prefix(word.size());
    return true;
  }
  std::optional<int> integer() {
    int value = 0;
    const auto [end, ec] = std::from_chars(rest_.data(), rest_.data() + rest_.size(), value);
    if (ec != std::errc{} || value < 0) return std::nullopt;
    rest_.remove_prefix(static_cast<std::size_t>(end - rest_.data()));
    return value;
  }
  bool done() const { return rest_.empty(); }

 private:
  std::string_view rest_;
};

std::optional<Flow> parse_flow(std::string_view text) {
  FlowLexer lex(text);
  Flow flow;
  std::optional<int> chunk, source, from, to, epoch;
  if (!lex.literal("Chunk ") || !(chunk = lex.integer()) || !lex.literal(" from ") ||
      !(source = lex.integer()) || !lex.literal(" traveled over ") || !(from = lex.integer()) ||
      !lex.literal("->") || !(to = lex.integer()) || !lex.literal(" in epoch ") ||
      !(epoch = lex.integer()))
    return std::nullopt;
  flow.chunk = *chunk;
  flow.source = *source;
  flow.epoch = *epoch;
  flow.path.push_back(*from);
  if (lex.literal(" via switches ")) {
    do {
      const std::optional<int> sw = lex.integer();
      if (!sw) return std::nullopt;
      flow.path.push_back(*sw);
    } while (lex.literal(" -> "));
  }
  flow.path.push_back(*to);
  if (!lex.done()) return std::nullopt;
  return flow;
}

/// A GPU-to-GPU transfer of one chunk, as the IR will carry it, and the flow it came from.
struct Transfer : EpochTransfer {
  std::size_t flow = 0;  ///< index in "7-Flows"
};

class FlowReader {
 public:
  FlowReader(const std::string& path, const TecclInput& in, const BuiltTopology& built)
      : path_(path), in_(in), built_(built) {}

  Transfer read(const nlohmann::json& entry, std::size_t index) const {
    const std::string at = "7-Flows[" + std::to_string(index) + "]";
    if (!entry.is_string()) fail(at, "must be a string");
    const std::optional<Flow> flow = parse_flow(entry.get<std::string>());
    if (!flow)
      fail(at, "'" + entry.get<std::string>() +
                   "' is not 'Chunk C from S traveled over I->J in epoch K[ via switches A -> B]'");
    if (flow->chunk >= in_.num_chunks)
      fail(at, "chunk " + std::to_string(flow->chunk) + " is not below InstanceParams.num_chunks " +
                   std::to_string(in_.num_chunks));
    Transfer t;
    t.chunk = gpu_rank(flow->source, at, "source") * in_.num_chunks + flow->chunk;
    t.sender = gpu_rank(flow->path.front(), at, "sender");
    t.receiver = gpu_rank(flow->path.back(), at, "receiver");
    t.epoch = flow->epoch;
    t.flow = index;
    for (std::size_t hop = 0; hop + 1 < flow->path.size(); ++hop) {
      if (hop > 0 && rank_of(flow->path[hop]) >= 0)
        fail(at, "node " + std::to_string(flow->path[hop]) + " after 'via switches' is a GPU");
      const auto link = built_.link_of.find({flow->path[hop], flow->path[hop + 1]});
      if (link == built_.link_of.end())
        fail(at, "no link " + std::to_string(flow->path[hop]) + "->" +
                     std::to_string(flow->path[hop + 1]) + " in " + built_.topo.name());
      t.route.push_back(link->second);
    }
    if (t.sender == t.receiver) fail(at, "sends to itself");
    return t;
  }

  [[noreturn]] void fail(const std::string& field, const std::string& message) const {
    throw InputError(support::SourceLocation{path_, 0, 0, field}, message);
  }

 private:
  int rank_of(int node) const {
    if (node < 0 || node >= static_cast<int>(built_.rank_of_node.size())) return -2;
    return built_.rank_of_node[static_cast<std::size_t>(node)];
  }
  int gpu_rank(int node, const std::string& at, const char* role) const {
    const int rank = rank_of(node);
    if (rank == -2)
      fail(at, std::string(role) + " node " + std::to_string(node) + " is not in " +
                   built_.topo.name() + " (" + std::to_string(built_.rank_of_node.size()) +
                   " nodes)");
    if (rank < 0)
      fail(at, std::string(role) + " node " + std::to_string(node) + " is a switch, not a GPU");
    return rank;
  }

  const std::string& path_;
  const TecclInput& in_;
  const BuiltTopology& built_;
};

std::string file_stem(const std::string& path) {
  const std::size_t slash = path.find_last_of('/');
  std::string stem = slash == std::string::npos ? path : path.substr(slash + 1);
  const std::size_t dot = stem.find_last_of('.');
  return dot == std::string::npos || dot == 0 ? stem : stem.substr(0, dot);
}

/// Switch copies: flows of one chunk that leave one GPU in one epoch into the same switch.
std::size_t multicast_extra_sends(const std::vector<Transfer>& transfers) {
  std::map<std::tuple<int, int, int, topology::LinkId>, std::size_t> fanout;
  for (const Transfer& t : transfers)
    if (t.route.size() > 1) ++fanout[{t.sender, t.chunk, t.epoch, t.route.front()}];
  std::size_t extra = 0;
  for (const auto& [key, count] : fanout) extra += count - 1;
  return extra;
}

template <typename... Args>
std::string format(const char* pattern, Args... args) {
  char buffer[256];
  std::snprintf(buffer, sizeof buffer, pattern, args...);
  return buffer;
}

std::vector<std::string> notes_for(const TecclInput& in, const BuiltTopology& built,
                                   const FieldReader& root,
                                   const std::vector<Transfer>& transfers) {
  std::vector<std::string> notes;
  const double epoch_s = root.number("1-Epoch_Duration");
  const double epochs = static_cast<double>(root.int32("3-Epochs_Required", 1));
  const double finish_s = root.number_or("4-Collective_Finish_Time", epoch_s * epochs);
  notes.push_back(format("TE-CCL: %.0f epochs of %g us = %g us for %g GB per GPU", epochs,
                         support::us_of_seconds(epoch_s), support::us_of_seconds(finish_s),
                         in.chunk_size_GB));
  if (root.has("5-Algo_Bandwidth"))
    notes.push_back(
        format("TE-CCL: 5-Algo_Bandwidth %g GB/s (node_per_chassis * chassis * "
               "chunk_size / finish time)",
               root.number("5-Algo_Bandwidth")));
  if (in.name == "NDv2" && in.chassis == 2)
    notes.push_back("TE-CCL's NDv2 with 2 chassis treats node 0 as a switch: " +
                    std::to_string(built.node_of_rank.size()) + " ranks");
  const std::size_t extra = multicast_extra_sends(transfers);
  if (extra > 0)
    notes.push_back("switch copies (switch_copy) became one send per receiver: " +
                    std::to_string(extra) + " more sends than TE-CCL's switch multicast");
  return notes;
}

}  // namespace

TecclImport import_teccl(const std::string& schedule_path, const std::string& input_path) {
  return import_teccl_text(support::read_text_file(schedule_path), schedule_path,
                           support::read_text_file(input_path), input_path);
}

TecclImport import_teccl_text(std::string_view schedule_text, const std::string& schedule_path,
                              std::string_view input_text, const std::string& input_path) {
  const TecclInput in = parse_input(input_text, input_path);
  BuiltTopology built = build_topology(build_fabric(in, input_path));
  const nlohmann::json doc = support::parse_json_text(schedule_text, schedule_path);
  const FieldReader root(doc, "", schedule_path);
  const nlohmann::json& flows = root.array("7-Flows");
  const FlowReader reader(schedule_path, in, built);
  std::vector<Transfer> transfers;
  transfers.reserve(flows.size());
  for (std::size_t i = 0; i < flows.size(); ++i) transfers.push_back(reader.read(flows[i], i));
  std::stable_sort(transfers.begin(), transfers.end(),
                   [](const Transfer& a, const Transfer& b) { return a.epoch < b.epoch; });

  EpochScheduleBuilder programs("teccl-" + file_stem(schedule_path), built.topo.name(),
                                static_cast<int>(built.node_of_rank.size()), in.num_chunks);
  for (const Transfer& t : transfers)
    if (const auto problem = programs.add(t))
      reader.fail("7-Flows[" + std::to_string(t.flow) + "]", *problem);
  if (const auto lost = programs.missing())
    reader.fail("7-Flows",
                "rank " + std::to_string(lost->first) + " (node " +
                    std::to_string(built.node_of_rank[static_cast<std::size_t>(lost->first)]) +
                    ") never receives chunk " + std::to_string(lost->second));
  std::vector<std::string> notes = notes_for(in, built, root, transfers);
  return {programs.take(), std::move(built.topo), std::move(notes)};
}

}  // namespace optiflow::schedule
