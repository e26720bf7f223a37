// libFuzzer target for TE-CCL import (docs/teccl-import.md): the bytes up to the first NUL are
// the solver input JSON, the rest its schedule output. Rejected with an InputError, or
// imported into a schedule the verifier accepts that survives schedule JSON and MSCCL XML.
#include "fuzz_support.hpp"
#include "optiflow/schedule/teccl_import.hpp"
#include "optiflow/schedule/verifier.hpp"

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  using namespace optiflow;
  const std::string_view text = fuzz::text_of(data, size);
  const std::size_t nul = text.find('\0');
  if (nul == std::string_view::npos) return 0;
  schedule::TecclImport imported;
  try {
    imported = schedule::import_teccl_text(text.substr(nul + 1), "schedule.json",
                                           text.substr(0, nul), "input.json");
  } catch (const support::InputError& e) {
    fuzz::check_rejection("teccl_fuzzer", e, text);
    return 0;
  }
  const auto verdict = schedule::verify_schedule(imported.schedule);
  if (!verdict.ok()) fuzz::crash("teccl_fuzzer", "an imported schedule the verifier rejects", text);
  fuzz::expect_schedule_round_trip("teccl_fuzzer", imported.schedule, text);
  return 0;
}
