// libFuzzer target for MSCCL XML import. Any bytes either fail to parse with an InputError or
// give a schedule that verify_schedule judges without throwing; a schedule it accepts survives
// export and import again (MSCCL XML and schedule JSON) unchanged. Anything else (another
// exception, a round-trip mismatch, a sanitizer report) is a crash.
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <string>
#include <string_view>

#include "optiflow/schedule/msccl_xml.hpp"
#include "optiflow/schedule/schedule_io.hpp"
#include "optiflow/schedule/verifier.hpp"
#include "optiflow/support/error.hpp"

namespace {

using namespace optiflow::support;
using namespace optiflow::schedule;

[[noreturn]] void crash(const std::string& what, std::string_view input,
                        const std::string& written) {
  std::fprintf(stderr,
               "msccl_xml_fuzzer: %s\n--- input ---\n%.*s\n--- written ---\n%s--- end ---\n",
               what.c_str(), static_cast<int>(input.size()), input.data(), written.c_str());
  std::abort();
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  const std::string_view xml(reinterpret_cast<const char*>(data), size);
  Schedule schedule;
  try {
    schedule = parse_msccl_xml(xml, "input.xml");
  } catch (const InputError&) {
    return 0;
  }
  if (!verify_schedule(schedule).ok()) return 0;

  const std::string written = write_msccl_xml(schedule);
  try {
    if (!(parse_msccl_xml(written, "written.xml") == schedule))
      crash("parse_msccl_xml(write_msccl_xml(s)) != s", xml, written);
  } catch (const InputError& e) {
    crash(std::string("the written XML does not parse: ") + e.what(), xml, written);
  }
  const std::string json = write_schedule_json(schedule);
  try {
    if (!(parse_schedule_json(json, "written.json") == schedule))
      crash("parse_schedule_json(write_schedule_json(s)) != s", xml, json);
  } catch (const InputError& e) {
    crash(std::string("the written JSON does not parse: ") + e.what(), xml, json);
  }
  return 0;
}
