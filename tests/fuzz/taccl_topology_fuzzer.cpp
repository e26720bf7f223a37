// libFuzzer target for TACCL's topology JSON: the first byte picks the node count (1 to 4),
// the rest is the file. Rejected with an InputError, or read into a topology that survives
// topology JSON.
#include "fuzz_support.hpp"
#include "optiflow/topology/taccl_topology.hpp"

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  using namespace optiflow;
  if (size == 0) return 0;
  const int nodes = 1 + data[0] % 4;
  const std::string_view text = fuzz::text_of(data + 1, size - 1);
  try {
    const auto read = topology::parse_taccl_topology(text, "input.json", nodes);
    fuzz::expect_topology_round_trip("taccl_topology_fuzzer", read.topology, text);
  } catch (const support::InputError& e) {
    fuzz::check_rejection("taccl_topology_fuzzer", e, text);
  }
  return 0;
}
