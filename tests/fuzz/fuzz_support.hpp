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

/// A topology read from some format survives topology JSON and back unchanged.
inline void expect_topology_round_trip(const char* fuzzer, const topology::Topology& topology,
                                       std::string_view input) {
  const std::string json = topology::write_topology_json(topology);
  try {
    if (!(topology::parse_topology_json(json, "written.json") == topology))
      crash(fuzzer, "parse_topology_json(write_topology_json(t)) != t", input, json);
  } catch (const support::InputError& e) {
    crash(fuzzer, std::string("the written topology does not parse: ") + e.what(), input, json);
  }
}

/// A schedule accepted from some format survives schedule JSON and MSCCL XML unchanged.
inline void expect_schedule_round_trip(const char* fuzzer, const schedule::Schedule& schedule,
                                       std::string_view input) {
  const std::string json = schedule::write_schedule_json(schedule);
  try {
    if (!(schedule::parse_schedule_json(json, "written.json") == schedule))
      crash(fuzzer, "parse_schedule_json(write_schedule_json(s)) != s", input, json);
  } catch (const support::InputError& e) {
    crash(fuzzer, std::string("the written JSON does not parse: ") + e.what(), input, json);
  }
  const std::string xml = schedule::write_msccl_xml(schedule);
  try {
    if (!(schedule::parse_msccl_xml(xml, "written.xml") == schedule))
      crash(fuzzer, "parse_msccl_xml(write_msccl_xml(s)) != s", input, xml);
  } catch (const support::InputError& e) {
    crash(fuzzer, std::string("the written XML does not parse: ") + e.what(), input, xml);
  }
}

}  // namespace optiflow::fuzz
