// TACCL's sketch JSON, read as cli/common.py's parse_and_get_topo reads it, and the default
// sketch for a topology of ours.
#include <algorithm>
#include <nlohmann/json.hpp>

#include "optiflow/baselines/taccl.hpp"
#include "optiflow/support/error.hpp"
#include "optiflow/support/parse_support.hpp"
#include "optiflow/support/text_file.hpp"
#include "taccl_internal.hpp"

namespace optiflow::baselines {
namespace {

using nlohmann::json;
using support::FieldReader;

std::vector<int> int_list(const FieldReader& r, const json& value, const std::string& at) {
  if (!value.is_array()) r.fail(at, "must be an array of GPU indices");
  std::vector<int> out;
  for (std::size_t i = 0; i < value.size(); ++i)
    out.push_back(static_cast<int>(
        r.integer_value(value[i], at + "[" + std::to_string(i) + "]", 0, 1 << 20)));
  return out;
}

// {"0": [1], ...}: keys are local GPU indices written as strings.
std::map<int, std::vector<int>> gpu_map(const FieldReader& r, const json& value,
                                        const std::string& at) {
  if (!value.is_object()) r.fail(at, "must be an object from GPU index to a list of GPUs");
  std::map<int, std::vector<int>> out;
  for (const auto& [key, list] : value.items()) {
    int gpu = -1;
    try {
      std::size_t used = 0;
      gpu = std::stoi(key, &used);
      if (used != key.size()) gpu = -1;
    } catch (const std::exception&) {
      gpu = -1;
    }
    if (gpu < 0) r.fail(at + "." + key, "the key must be a GPU index, not '" + key + "'");
    out[gpu] = int_list(r, list, at + "." + key);
  }
  return out;
}

void read_intranode(const FieldReader& top, TacclSketch& sketch) {
  const FieldReader r(top.required("intranode_sketch", "object"), "intranode_sketch", top.source());
  const std::string strategy = r.string("strategy");
  if (strategy == "none") return;
  if (strategy == "minmax" || strategy == "maxmin") {
    sketch.intra = strategy == "minmax" ? TacclIntraStrategy::minmax : TacclIntraStrategy::maxmin;
    return;
  }
  if (strategy != "switch")
    r.fail(r.field("strategy"),
           "unknown strategy '" + strategy + "' (none, switch, minmax or maxmin)");
  sketch.intra = TacclIntraStrategy::switch_;
  const json& switches = r.array("switches");
  const json& hyperedges = r.array("switch_hyperedge_strategy");
  if (switches.size() != hyperedges.size())
    r.fail(r.field("switch_hyperedge_strategy"), "needs one entry per switch (" +
                                                     std::to_string(switches.size()) + "), not " +
                                                     std::to_string(hyperedges.size()));
  for (std::size_t i = 0; i < switches.size(); ++i)
    sketch.switches.push_back(
        int_list(r, switches[i], r.field("switches") + "[" + std::to_string(i) + "]"));
  if (sketch.switches.empty()) r.fail(r.field("switches"), "must name at least one switch");
  // TACCL's objective looks at the first switch's strategy only (routing.py).
  const json& first = hyperedges[0];
  const std::string at = r.field("switch_hyperedge_strategy") + "[0]";
  if (!first.is_string()) r.fail(at, "must be a string");
  const std::string name = first.get<std::string>();
  if (name == "uc-min")
    sketch.hyperedge = TacclHyperedge::uc_min;
  else if (name == "uc-max")
    sketch.hyperedge = TacclHyperedge::uc_max;
  else if (name != "none")
    r.fail(at, "unknown hyperedge strategy '" + name + "' (uc-min, uc-max or none)");
}

void read_internode(const FieldReader& top, TacclSketch& sketch) {
  if (sketch.nnodes == 1) return;  // TACCL ignores it on one node
  const FieldReader r(top.required("internode_sketch", "object, with more than one node"),
                      "internode_sketch", top.source());
  const std::string strategy = r.string("strategy");
  if (strategy != "relay")
    r.fail(r.field("strategy"), "TACCL builds the 'relay' strategy only, not '" + strategy + "'");
  const json& conn = r.required("internode_conn", "object or name");
  if (conn.is_string()) {
    sketch.internode_conn_name = conn.get<std::string>();
    if (sketch.internode_conn_name != "fully-connected" &&
        sketch.internode_conn_name != "direct-map")
      r.fail(r.field("internode_conn"), "unknown map '" + sketch.internode_conn_name +
                                            "' (fully-connected, direct-map or an object)");
  } else {
    sketch.internode_conn = gpu_map(r, conn, r.field("internode_conn"));
    if (sketch.internode_conn.empty())
      r.fail(r.field("internode_conn"), "must name at least one sending GPU");
    const std::size_t width = sketch.internode_conn.begin()->second.size();
    for (const auto& [gpu, dsts] : sketch.internode_conn)
      if (dsts.size() != width || dsts.empty())
        r.fail(r.field("internode_conn") + "." + std::to_string(gpu),
               "every sending GPU needs the same number of receivers (TACCL's rule), " +
                   std::to_string(width) + " here");
  }
  if (r.has("gpus_to_sender_rev_map"))
    sketch.chunk_to_relay = gpu_map(r, r.required("gpus_to_sender_rev_map", "object"),
                                    r.field("gpus_to_sender_rev_map"));
  sketch.enforce_ordering = r.boolean_or("enforce_ordering", false);
  if (sketch.enforce_ordering && sketch.chunk_to_relay.empty())
    r.fail(r.field("enforce_ordering"), "needs gpus_to_sender_rev_map");
}

}  // namespace

TacclSketch parse_taccl_sketch(std::string_view text, const std::string& source) {
  const json doc = support::parse_json_text(text, source);
  const FieldReader r(doc, "", source);
  TacclSketch sketch;
  sketch.source = source;
  sketch.nnodes = static_cast<int>(r.integer("nnodes", 1, 1 << 16));
  read_intranode(r, sketch);
  read_internode(r, sketch);
  const json& offsets = r.array("symmetry_offsets");
  for (std::size_t i = 0; i < offsets.size(); ++i) {
    const std::string at = "symmetry_offsets[" + std::to_string(i) + "]";
    const std::vector<int> pair = int_list(r, offsets[i], at);
    if (pair.size() != 2 || pair[1] < 1)
      r.fail(at, "must be [offset, group size] with a positive group size");
    sketch.symmetry_offsets.emplace_back(pair[0], pair[1]);
  }
  const FieldReader hyper(r.required("hyperparameters", "object"), "hyperparameters", source);
  sketch.input_chunkup = static_cast<int>(hyper.integer("input_chunkup", 1, 64));
  return sketch;
}

TacclSketch read_taccl_sketch(const std::string& path) {
  return parse_taccl_sketch(support::read_text_file(path), path);
}

std::map<int, std::vector<int>> relay_map(const TacclSketch& sketch, int gpus_per_node) {
  if (sketch.internode_conn_name.empty()) return sketch.internode_conn;
  std::map<int, std::vector<int>> conn;
  for (int i = 0; i < gpus_per_node; ++i)
    for (int j = 0; j < gpus_per_node; ++j)
      if (sketch.internode_conn_name == "fully-connected" || i == j) conn[i].push_back(j);
  return conn;
}

TacclSketch default_taccl_sketch(const topology::Topology& topology) {
  TacclSketch sketch;
  sketch.source = "default sketch for " + topology.name();
  sketch.nnodes = std::max(1, topology.host_count());
  const int ranks = topology.rank_count();
  const int per_node = ranks / sketch.nnodes;
  // NVSwitch inside a node: a GPU reaches its peers through a switch node.
  const auto out = topology.out_links(topology.gpu_of_rank(0));
  const bool switched =
      per_node > 1 && std::any_of(out.begin(), out.end(), [&](topology::LinkId l) {
        const auto& link = topology.link(l);
        return link.kind == topology::LinkKind::nvswitch &&
               topology.node(link.dst).kind == topology::NodeKind::switch_;
      });
  if (switched) {
    sketch.intra = TacclIntraStrategy::switch_;
    sketch.hyperedge = TacclHyperedge::uc_min;
    sketch.switches.emplace_back();
    for (int local = 0; local < per_node; ++local) sketch.switches.back().push_back(local);
  }
  if (sketch.nnodes > 1) {
    int nics = 0;
    for (const auto& node : topology.nodes())
      if (node.kind == topology::NodeKind::nic &&
          node.host == topology.node(topology.gpu_of_rank(0)).host)
        ++nics;
    if (nics > 1)
      sketch.internode_conn_name = "direct-map";
    else
      sketch.internode_conn = {{0, {per_node > 1 ? 1 : 0}}};
  }
  // Symmetries: the first rotation of local indices that maps the topology onto itself, then
  // the rotation of nodes.
  const taccl::LogicalTopology logical = taccl::logical_topology(topology, sketch, nullptr);
  for (int offset : {1, 2, 4})
    if (offset < per_node && per_node % offset == 0 &&
        taccl::symmetric_under(logical, offset, per_node)) {
      sketch.symmetry_offsets.emplace_back(offset, per_node);
      break;
    }
  if (sketch.nnodes > 1 && taccl::symmetric_under(logical, per_node, ranks))
    sketch.symmetry_offsets.emplace_back(per_node, ranks);
  return sketch;
}

}  // namespace optiflow::baselines
