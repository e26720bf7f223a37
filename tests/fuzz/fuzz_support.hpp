// What the libFuzzer targets share: bytes as text, and how a finding is reported. A target
// returns normally for input its parser rejects with an InputError (one clear message naming
// the file, the place and the field) and for input it accepts and handles consistently;
// anything else (another exception, a broken round trip, a sanitizer report) calls crash().
#pragma once

#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <string>
#include <string_view>

#include "optiflow/schedule/msccl_xml.hpp"
#include "optiflow/schedule/schedule_io.hpp"
#include "optiflow/support/error.hpp"
#include "optiflow/topology/topology_io.hpp"

namespace optiflow::fuzz {

inline std::string_view text_of(const std::uint8_t* data, std::size_t size) {
  return {reinterpret_cast<const char*>(data), size};
}

[[noreturn]] inline void crash(const char* fuzzer, const std::string& what, std::string_view input,
                               const std::string& written = {}) {
  std::fprintf(stderr, "%s: %s\n--- input ---\n%.*s\n--- written ---\n%s--- end ---\n", fuzzer,
               what.c_str(), static_cast<int>(input.size()), input.data(), written.c_str());
  std::abort();
}

/// A rejection must say where: the input's name, and a message that starts with it.
inline void check_rejection(const char* fuzzer, const support::InputError& e,
                            std::string_view input) {
  const std::string message = e.what();
  if (e.where().file.empty() || message.rfind(e.where().file, 0) != 0)
    crash(fuzzer, "a rejection that does not name its input: '" + message + "'", input);
}

/// `value`, written as `written` in some format, reads back (`read`) as itself.
template <typename T, typename Read>
void expect_reads_back(const char* fuzzer, const T& value, const std::string& written, Read read,
                       const char* format, std::string_view input) {
  try {
    if (!(read(written) == value))
      crash(fuzzer, std::string("what it wrote as ") + format + " reads back differently", input,
            written);
  } catch (const support::InputError& e) {
    crash(fuzzer, std::string("what it wrote as ") + format + " does not parse: " + e.what(), input,
          written);
  }
}

/// A topology read from some format survives topology JSON and back unchanged.
inline void expect_topology_round_trip(const char* fuzzer, const topology::Topology& topology,
                                       std::string_view input) {
  expect_reads_back(
      fuzzer, topology, topology::write_topology_json(topology),
      [](const std::string& text) { return topology::parse_topology_json(text, "written.json"); },
      "topology JSON", input);
}

/// A schedule accepted from some format survives schedule JSON and MSCCL XML unchanged.
inline void expect_schedule_round_trip(const char* fuzzer, const schedule::Schedule& schedule,
                                       std::string_view input) {
  expect_reads_back(
      fuzzer, schedule, schedule::write_schedule_json(schedule),
      [](const std::string& text) { return schedule::parse_schedule_json(text, "written.json"); },
      "schedule JSON", input);
  expect_reads_back(
      fuzzer, schedule, schedule::write_msccl_xml(schedule),
      [](const std::string& text) { return schedule::parse_msccl_xml(text, "written.xml"); },
      "MSCCL XML", input);
}

}  // namespace optiflow::fuzz
