// libFuzzer target for NCCL topology XML import (docs/nccl-topo-import.md): rejected with an
// InputError at the XML line, or imported into a topology that survives topology JSON.
#include "fuzz_support.hpp"
#include "optiflow/topology/nccl_topo_xml.hpp"

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  using namespace optiflow;
  const std::string_view text = fuzz::text_of(data, size);
  try {
    const auto imported = topology::import_nccl_topology_xml(text, "input.xml");
    fuzz::expect_topology_round_trip("nccl_topo_xml_fuzzer", imported.topology, text);
  } catch (const support::InputError& e) {
    fuzz::check_rejection("nccl_topo_xml_fuzzer", e, text);
  }
  return 0;
}
