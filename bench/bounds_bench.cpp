// How long the exact max-flow bound takes as a100xK grows (goal: a100x128 in seconds).
#include <benchmark/benchmark.h>

#include "optiflow/topology/bounds.hpp"
#include "optiflow/topology/generators.hpp"

namespace {

using namespace optiflow::topology;
using optiflow::support::Collective;

void BM_AllGatherBoundA100(benchmark::State& state) {
  const Topology topo = make_a100(static_cast<int>(state.range(0)));
  for (auto _ : state) benchmark::DoNotOptimize(LowerBound::compute(topo, Collective::all_gather));
  state.counters["gpus"] = topo.rank_count();
}
BENCHMARK(BM_AllGatherBoundA100)->RangeMultiplier(2)->Range(1, 128)->Unit(benchmark::kMillisecond);

void BM_AllGatherBoundTorus(benchmark::State& state) {
  const int side = static_cast<int>(state.range(0));
  const Topology topo = make_torus(side, side);
  for (auto _ : state) benchmark::DoNotOptimize(LowerBound::compute(topo, Collective::all_gather));
  state.counters["gpus"] = topo.rank_count();
}
BENCHMARK(BM_AllGatherBoundTorus)->DenseRange(4, 16, 4)->Unit(benchmark::kMillisecond);

}  // namespace
