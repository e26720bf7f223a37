// libFuzzer target for MSCCL++ execution plans: rejected with an InputError, or read into a
// schedule the verifier judges without throwing; one it accepts is written as a plan and
// read back unchanged.
#include "fuzz_support.hpp"
#include "optiflow/schedule/mscclpp_plan.hpp"
#include "optiflow/schedule/verifier.hpp"

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  using namespace optiflow;
  const std::string_view text = fuzz::text_of(data, size);
  schedule::Schedule schedule;
  try {
    schedule = schedule::parse_mscclpp_plan(text, "input.json");
  } catch (const support::InputError& e) {
    fuzz::check_rejection("mscclpp_plan_fuzzer", e, text);
    return 0;
  }
  if (!schedule::verify_schedule(schedule).ok()) return 0;
  fuzz::expect_reads_back(
      "mscclpp_plan_fuzzer", schedule, schedule::write_mscclpp_plan(schedule),
      [](const std::string& written) {
        return schedule::parse_mscclpp_plan(written, "written.json");
      },
      "an MSCCL++ plan", text);
  return 0;
}
