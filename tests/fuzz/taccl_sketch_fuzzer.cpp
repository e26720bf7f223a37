// libFuzzer target for TACCL's communication sketch JSON: rejected with an InputError naming
// the file and the field, or read.
#include "fuzz_support.hpp"
#include "optiflow/baselines/taccl.hpp"

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  using namespace optiflow;
  const std::string_view text = fuzz::text_of(data, size);
  try {
    baselines::parse_taccl_sketch(text, "input.json");
  } catch (const support::InputError& e) {
    fuzz::check_rejection("taccl_sketch_fuzzer", e, text);
  }
  return 0;
}
