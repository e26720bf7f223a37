// What the benchmarks share: example programs, built-in topologies and compiled schedules,
// built once per process and kept, so that a benchmark times only what it measures.
#pragma once

#include <fstream>
#include <map>
#include <memory>
#include <sstream>
#include <string>
#include <utility>

#include "optiflow/compiler/compiler.hpp"
#include "optiflow/topology/generators.hpp"

namespace optiflow::bench {

inline std::string read_program(const std::string& file) {
  std::ifstream in(std::string(OPTIFLOW_SOURCE_DIR) + "/datasets/programs/" + file);
  std::ostringstream text;
  text << in.rdbuf();
  return text.str();
}

inline const topology::Topology& topology(const std::string& name) {
  static std::map<std::string, std::unique_ptr<topology::Topology>> cache;
  auto& slot = cache[name];
  if (!slot) slot = std::make_unique<topology::Topology>(*topology::make_builtin_topology(name));
  return *slot;
}

inline const schedule::Schedule& schedule(const std::string& topo, const std::string& program) {
  static std::map<std::pair<std::string, std::string>, std::unique_ptr<schedule::Schedule>> cache;
  auto& slot = cache[{topo, program}];
  if (!slot)
    slot = std::make_unique<schedule::Schedule>(
        compiler::compile_program(program, "bench.ofl", topology(topo)).schedule);
  return *slot;
}

}  // namespace optiflow::bench
