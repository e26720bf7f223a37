#include "optiflow/topology/topology_io.hpp"

#include <filesystem>
#include <limits>
#include <map>
#include <nlohmann/json.hpp>
#include <optional>

#include "optiflow/support/error.hpp"
#include "optiflow/support/parse_support.hpp"
#include "optiflow/support/text_file.hpp"
#include "optiflow/topology/generators.hpp"
#include "optiflow/topology/topology_summary.hpp"

namespace optiflow::topology {
namespace {

using nlohmann::json;

void read_nodes(const support::FieldReader& top, Topology& topo,
                std::map<std::string, NodeId>& by_id, const std::string& source) {
  const json& nodes = top.array("nodes");
  for (std::size_t i = 0; i < nodes.size(); ++i) {
    support::FieldReader r(nodes[i], "nodes[" + std::to_string(i) + "]", source);
    Node node;
    node.id = r.string("id");
    const std::string kind = r.string("kind");
    const auto parsed = node_kind_from_string(kind);
    if (!parsed) r.fail(r.field("kind"), "unknown node kind '" + kind + "' (gpu|switch|nic|cpu)");
    node.kind = *parsed;
    if (node.kind == NodeKind::gpu && !r.has("rank"))
      r.fail(r.field("rank"), "missing (every gpu needs a rank)");
    node.rank = r.int32_or("rank", -1, -1);
    node.host = r.int32_or("host", -1, -1);
    node.local = r.int32_or("local", -1, -1);
    if (by_id.contains(node.id)) r.fail(r.field("id"), "duplicate node id '" + node.id + "'");
    const std::string id = node.id;
    by_id[id] = topo.add_node(std::move(node));
  }
}

void read_links(const support::FieldReader& top, Topology& topo,
                const std::map<std::string, NodeId>& by_id, const std::string& source) {
  const json& links = top.array("links");
  for (std::size_t i = 0; i < links.size(); ++i) {
    support::FieldReader r(links[i], "links[" + std::to_string(i) + "]", source);
    auto endpoint = [&](const char* key) {
      const std::string id = r.string(key);
      auto it = by_id.find(id);
      if (it == by_id.end()) r.fail(r.field(key), "no node has id '" + id + "'");
      return it->second;
    };
    const NodeId src = endpoint("src");
    const NodeId dst = endpoint("dst");
    if (src == dst)
      r.fail(r.field("dst"), "a link cannot join '" + topo.node(src).id + "' to itself");
    LinkSpec spec;
    const std::string kind = r.string_or("kind", "other");
    const auto parsed = link_kind_from_string(kind);
    if (!parsed)
      r.fail(r.field("kind"),
             "unknown link kind '" + kind + "' (nvlink|nvswitch|pcie|ib|ethernet|cpu|other)");
    spec.kind = *parsed;
    spec.bw_GBps = r.number("bw_GBps");
    if (!(spec.bw_GBps > 0) || !(spec.bw_GBps <= kMaxLinkGBps))
      r.fail(r.field("bw_GBps"), "must be a positive number of GB/s, at most 1e6");
    spec.alpha_us = r.number_or("alpha_us", 0.0);
    if (!(spec.alpha_us >= 0)) r.fail(r.field("alpha_us"), "must be >= 0 microseconds");
    if (r.boolean_or("bidirectional", false))
      topo.add_duplex(src, dst, spec);
    else
      topo.add_link(src, dst, spec);
  }
}

// "runtime": {"launch_us": L, "serial_steps": S,
//             "messages": [{"max_bytes": B, "alpha_us": A, "bw_factor": F}, ...]}:
// the last band without max_bytes holds every larger message. Ranges are checked by
// Topology::validate.
std::optional<RuntimeCosts> read_runtime(const support::FieldReader& top) {
  if (!top.has("runtime")) return std::nullopt;
  const support::FieldReader r(top.required("runtime", "object"), top.field("runtime"),
                               top.source());
  RuntimeCosts runtime;
  runtime.launch_us = r.number_or("launch_us", 0.0);
  runtime.serial_steps = r.boolean_or("serial_steps", false);
  const json& bands = r.has("messages") ? r.array("messages") : json::array();
  for (std::size_t i = 0; i < bands.size(); ++i) {
    const support::FieldReader b(bands[i], r.field("messages") + "[" + std::to_string(i) + "]",
                                 top.source());
    runtime.bands.push_back(MessageBand{
        b.has("max_bytes") ? static_cast<std::uint64_t>(b.integer(
                                 "max_bytes", 1, std::numeric_limits<std::int64_t>::max()))
                           : 0,
        b.number_or("alpha_us", 0.0), b.number_or("bw_factor", 1.0)});
  }
  return runtime;
}

json runtime_json(const RuntimeCosts& runtime) {
  json bands = json::array();
  for (const MessageBand& band : runtime.bands) {
    json b{{"alpha_us", band.alpha_us}, {"bw_factor", band.bw_factor}};
    if (band.max_bytes != 0) b["max_bytes"] = band.max_bytes;
    bands.push_back(std::move(b));
  }
  return json{{"launch_us", runtime.launch_us},
              {"serial_steps", runtime.serial_steps},
              {"messages", std::move(bands)}};
}

// The nodes reachable from `from` along links (forward) or against them (backward).
std::vector<bool> reachable(const Topology& topo, NodeId from, bool forward) {
  std::vector<bool> seen(topo.node_count(), false);
  std::vector<NodeId> todo{from};
  seen[from] = true;
  while (!todo.empty()) {
    const NodeId at = todo.back();
    todo.pop_back();
    for (LinkId l : forward ? topo.out_links(at) : topo.in_links(at)) {
      const NodeId next = forward ? topo.link(l).dst : topo.link(l).src;
      if (!seen[next]) {
        seen[next] = true;
        todo.push_back(next);
      }
    }
  }
  return seen;
}

// Every GPU must reach every other, or no collective can complete. Checked while reading,
// where the error can name the file (the bound and the router know only the topology's name).
// GPUs reach each other iff all reach rank 0 and rank 0 reaches all; where that fails, the
// message names a set of GPUs that no link leaves.
void require_connected_gpus(const Topology& topo, const support::FieldReader& top) {
  const NodeId hub = topo.gpu_of_rank(0);
  for (bool forward : {true, false}) {
    const std::vector<bool> seen = reachable(topo, hub, forward);
    std::vector<NodeId> reached, missed;
    for (NodeId gpu : topo.gpus_by_rank()) (seen[gpu] ? reached : missed).push_back(gpu);
    if (missed.empty()) continue;
    top.fail("links", "no link leads from " + describe_gpus(topo, forward ? reached : missed) +
                          " to the other GPUs, so no collective can complete");
  }
}

std::string default_name(const std::string& source) {
  return std::filesystem::path(source).stem().string();
}

}  // namespace

Topology parse_topology_json(std::string_view text, const std::string& source) {
  const json doc = support::parse_json_text(text, source);
  support::FieldReader top(doc, "", source);
  Topology topo(top.string_or("name", default_name(source)));
  topo.set_op_overhead_us(top.number_or("op_overhead_us", 0.0));
  topo.set_gpu_sm(top.int32_or("gpu_sm", 0, 0));
  topo.set_runtime(read_runtime(top));
  std::map<std::string, NodeId> by_id;
  read_nodes(top, topo, by_id, source);
  read_links(top, topo, by_id, source);
  topo.validate(source);
  if (topo.rank_count() == 0) top.fail("nodes", "the topology has no gpu");
  require_connected_gpus(topo, top);
  return topo;
}

Topology read_topology_file(const std::string& path) {
  return parse_topology_json(support::read_text_file(path), path);
}

std::string write_topology_json(const Topology& topology) {
  json doc;
  doc["name"] = topology.name();
  if (topology.op_overhead_us() != 0) doc["op_overhead_us"] = topology.op_overhead_us();
  if (topology.gpu_sm() != 0) doc["gpu_sm"] = topology.gpu_sm();
  if (topology.runtime()) doc["runtime"] = runtime_json(*topology.runtime());
  json nodes = json::array();
  for (const Node& n : topology.nodes()) {
    json node{{"id", n.id}, {"kind", to_string(n.kind)}};
    if (n.rank >= 0) node["rank"] = n.rank;
    if (n.host >= 0) node["host"] = n.host;
    if (n.local >= 0) node["local"] = n.local;
    nodes.push_back(std::move(node));
  }
  json links = json::array();
  const auto all = topology.links();
  for (std::size_t i = 0; i < all.size(); ++i) {
    const Link& l = all[i];
    json link{{"src", topology.node(l.src).id},
              {"dst", topology.node(l.dst).id},
              {"bw_GBps", l.bw_GBps},
              {"alpha_us", l.alpha_us},
              {"kind", to_string(l.kind)}};
    const bool reverse_follows = i + 1 < all.size() && all[i + 1].src == l.dst &&
                                 all[i + 1].dst == l.src && all[i + 1].kind == l.kind &&
                                 all[i + 1].bw_GBps == l.bw_GBps &&
                                 all[i + 1].alpha_us == l.alpha_us;
    if (reverse_follows) {
      link["bidirectional"] = true;
      ++i;
    }
    links.push_back(std::move(link));
  }
  doc["nodes"] = std::move(nodes);
  doc["links"] = std::move(links);
  return doc.dump(2, ' ', false, nlohmann::json::error_handler_t::replace) + "\n";
}

Topology load_topology(const std::string& name_or_path) {
  if (auto builtin = make_builtin_topology(name_or_path)) return std::move(*builtin);
  if (std::filesystem::exists(name_or_path)) return read_topology_file(name_or_path);
  throw support::InputError(
      support::SourceLocation{name_or_path, 0, 0, {}},
      "neither a built-in topology (see `optiflow topo list`) nor an existing file");
}

}  // namespace optiflow::topology
