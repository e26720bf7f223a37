// Import of Microsoft TE-CCL's All-Gather schedules (the solver's output JSON with its input
// JSON) into the schedule IR, with the topology TE-CCL solved on. docs/teccl-import.md says
// what is read, how nodes become ranks and how flows become steps.
#pragma once

#include <string>
#include <string_view>
#include <vector>

#include "optiflow/schedule/schedule.hpp"
#include "optiflow/topology/topology.hpp"

namespace optiflow::schedule {

struct TecclImport {
  Schedule schedule;            ///< in-place All-Gather; routes refer to `topology`
  topology::Topology topology;  ///< TE-CCL's topology for the input's name and chassis
  /// How the import departed from what TE-CCL's model assumes, one line each (e.g. switch
  /// copies replaced by one send per receiver), and TE-CCL's own finish-time figures.
  std::vector<std::string> notes;
};

/// Reads TE-CCL's schedule output (`schedule_path`) and the solver input it came from
/// (`input_path`). Throws InputError naming the file and the field or flow index for a missing
/// key, a flow that does not parse, a node or link not in the topology, a chunk forwarded
/// before it arrived or never delivered.
TecclImport import_teccl(const std::string& schedule_path, const std::string& input_path);
/// The same from the two files' text; the paths name them in errors.
TecclImport import_teccl_text(std::string_view schedule_text, const std::string& schedule_path,
                              std::string_view input_text, const std::string& input_path);

}  // namespace optiflow::schedule
