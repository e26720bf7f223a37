// A built-in topology's schedule compiled from a DSL program, for tests of what consumes
// schedules (the runner, the exporters).
#pragma once

#include <string>

#include "optiflow/compiler/compiler.hpp"
#include "optiflow/topology/generators.hpp"

namespace optiflow::testing_support {

inline schedule::Schedule compiled(const std::string& program, const std::string& topology_name,
                                   support::Collective collective) {
  const topology::Topology topo = *topology::make_builtin_topology(topology_name);
  compiler::CompileOptions options;
  options.collective = collective;
  return compiler::compile_program(program, "test.ofl", topo, options).schedule;
}

}  // namespace optiflow::testing_support
