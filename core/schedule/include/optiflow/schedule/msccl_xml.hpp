// MSCCL's algorithm XML (msccl-executor-nccl, MSCCLang, TACCL, TE-CCL): export and import of
// schedules. docs/formats.md says what is written and what import accepts and normalises.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>

#include "optiflow/schedule/schedule.hpp"

namespace optiflow::schedule {

/// Whether `name` is one of MSCCL's protocols: Simple, LL, LL128.
bool is_msccl_protocol(std::string_view name);

struct MscclExportOptions {
  /// The message sizes (bytes, per rank as nccl-tests counts them) the executor may pick this
  /// algorithm for: minBytes and maxBytes. max_bytes 0 writes no range (neither attribute).
  std::uint64_t min_bytes = 0;
  std::uint64_t max_bytes = 0;
  /// MSCCL's outofplace="1": the algorithm may also serve out-of-place calls. Always written as 1
  /// for a schedule that is not in-place.
  bool outofplace = false;
};

/// Writes the schedule as MSCCL XML. A step with k > 1 dependencies is preceded by k - 1
/// dependency-only `nop` steps (MSCCLang's convention), and step indices shift accordingly;
/// routes go in a `route="3,17"` attribute that MSCCL ignores. Expects a structurally valid
/// schedule (dependencies that name existing steps).
std::string write_msccl_xml(const Schedule& schedule, const MscclExportOptions& options = {});

/// Parses MSCCL XML. Dependency-only nops are folded back into the next step's deps, so
/// parse_msccl_xml(write_msccl_xml(s)) == s. Throws InputError with the line and a field such as
/// `<step s="4">.cnt`, the message naming the gpu and thread block.
Schedule parse_msccl_xml(std::string_view xml, const std::string& source);

/// Reads an MSCCL XML file; errors name the file.
Schedule read_msccl_xml_file(const std::string& path);

}  // namespace optiflow::schedule
