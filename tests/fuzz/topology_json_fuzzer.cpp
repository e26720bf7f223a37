// libFuzzer target for topology JSON (docs/formats.md): rejected with an InputError, or read
// into a topology that survives writing and reading again, and whose lower bound is computed
// (or refused as unsupported: GPUs that cannot reach each other).
#include "fuzz_support.hpp"
#include "optiflow/topology/bounds.hpp"

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  using namespace optiflow;
  const std::string_view text = fuzz::text_of(data, size);
  topology::Topology topo;
  try {
    topo = topology::parse_topology_json(text, "input.json");
  } catch (const support::InputError& e) {
    fuzz::check_rejection("topology_json_fuzzer", e, text);
    return 0;
  }
  fuzz::expect_topology_round_trip("topology_json_fuzzer", topo, text);
  try {
    const auto bound = topology::LowerBound::compute(topo, support::Collective::all_gather);
    if (topo.rank_count() > 1 && !(bound.at(1 << 20).time_us > 0))
      fuzz::crash("topology_json_fuzzer", "a bound that is not positive", text);
  } catch (const support::UnsupportedError&) {
  }
  return 0;
}
