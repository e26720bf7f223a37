// libFuzzer target for MSCCL XML import. Any bytes either fail to parse with an InputError or
// give a schedule that verify_schedule judges without throwing; a schedule it accepts survives
// export and import again (MSCCL XML and schedule JSON) unchanged.
#include "fuzz_support.hpp"
#include "optiflow/schedule/verifier.hpp"

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  using namespace optiflow;
  const std::string_view xml = fuzz::text_of(data, size);
  schedule::Schedule schedule;
  try {
    schedule = schedule::parse_msccl_xml(xml, "input.xml");
  } catch (const support::InputError& e) {
    fuzz::check_rejection("msccl_xml_fuzzer", e, xml);
    return 0;
  }
  if (schedule::verify_schedule(schedule).ok())
    fuzz::expect_schedule_round_trip("msccl_xml_fuzzer", schedule, xml);
  return 0;
}
