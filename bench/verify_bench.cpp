// How fast verify_schedule proves compiled schedules (goal: a 1,024-rank ring All-Gather in under
// 2 s), structure, symbolic execution, race analysis and postcondition together.
//
// Schedules are compiled once per process and kept; each iteration verifies one of them.
#include <benchmark/benchmark.h>

#include <memory>
#include <string>
#include <utility>

#include "fixtures.hpp"
#include "optiflow/compiler/compiler.hpp"
#include "optiflow/schedule/verifier.hpp"
#include "optiflow/topology/generators.hpp"

namespace {

using optiflow::schedule::Schedule;
using optiflow::topology::Topology;

using optiflow::bench::read_program;
using optiflow::bench::schedule;
using optiflow::bench::topology;

void BM_Verify(benchmark::State& state, const std::string& topo, const std::string& program) {
  const Schedule& s = schedule(topo, program);
  const Topology& t = topology(topo);
  for (auto _ : state) {
    const optiflow::schedule::VerifyResult result = optiflow::schedule::verify_schedule(s, &t);
    if (!result.ok()) state.SkipWithError(result.summary().c_str());
    benchmark::DoNotOptimize(result);
  }
  state.counters["ranks"] = s.ranks;
  state.counters["steps"] = static_cast<double>(s.step_count());
  state.counters["steps_per_s"] = benchmark::Counter(
      static_cast<double>(s.step_count() * state.iterations()), benchmark::Counter::kIsRate);
}

const bool kRegistered = [] {
  const std::string ring = "ring over all";
  for (const char* topo : {"ring1024", "a100x128"})
    benchmark::RegisterBenchmark((std::string("BM_VerifyRing/") + topo).c_str(), BM_Verify, topo,
                                 ring)
        ->Unit(benchmark::kMillisecond);
  const std::string multi_ring = read_program("multi-ring.ofl");
  for (int nodes : {16, 32, 64}) {
    const std::string topo = "a100x" + std::to_string(nodes);
    benchmark::RegisterBenchmark(("BM_VerifyMultiRing/" + topo).c_str(), BM_Verify, topo,
                                 multi_ring)
        ->Unit(benchmark::kMillisecond);
  }
  return true;
}();

}  // namespace
