// libFuzzer target for schedule JSON (docs/schedule-ir.md): rejected with an InputError, or
// read into a schedule that the verifier judges without throwing; one it accepts survives
// schedule JSON and MSCCL XML unchanged.
#include "fuzz_support.hpp"
#include "optiflow/schedule/verifier.hpp"

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  using namespace optiflow;
  const std::string_view text = fuzz::text_of(data, size);
  schedule::Schedule schedule;
  try {
    schedule = schedule::parse_schedule_json(text, "input.json");
  } catch (const support::InputError& e) {
    fuzz::check_rejection("schedule_json_fuzzer", e, text);
    return 0;
  }
  if (schedule::verify_schedule(schedule).ok())
    fuzz::expect_schedule_round_trip("schedule_json_fuzzer", schedule, text);
  return 0;
}
