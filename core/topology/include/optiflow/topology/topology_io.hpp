// Reading and writing the topology JSON format of docs/formats.md, and resolving `--topo T`.
#pragma once

#include <string>
#include <string_view>

#include "optiflow/topology/topology.hpp"

namespace optiflow::topology {

/// Parses topology JSON text. `source` names the input in error messages. Throws InputError
/// naming the field (e.g. `links[3].bw_GBps`) or the line and column of a syntax error, and
/// for GPUs that cannot all reach each other (no collective could complete on them).
Topology parse_topology_json(std::string_view text, const std::string& source);

/// Reads a topology JSON file; errors name the file.
Topology read_topology_file(const std::string& path);

/// Writes the topology as JSON (2-space indent). Adjacent reverse links with the same figures
/// are written once with `"bidirectional": true`, so parse(write(t)) == t.
std::string write_topology_json(const Topology& topology);

/// Resolves the `T` of `--topo T`: a built-in name (see generators.hpp) or a JSON file path.
Topology load_topology(const std::string& name_or_path);

}  // namespace optiflow::topology
