// How fast the simulator evaluates candidates under the FIFO-connection cost model (goals:
// >= 2000/s alpha-beta, >= 300/s flow for a 32-GPU All-Gather with 8 chunks per rank on
// a100x4) and how it scales with the cluster (goals: a ring on a100x128, 1024 GPUs, in under a
// second with alpha-beta; time per transfer within 2x from 32 to 1024 GPUs).
//
// A candidate is an already-compiled schedule; evaluating it = what explore does with it
// (explore/src/evaluator.cpp): construct the Simulator and run every size explore uses by
// default (1K:1G, 21 sizes). BM_Candidate1G constructs and runs 1 GiB only (the figure this bench
// reported before it measured explore's sizes). Construction and one run are also timed on their
// own.
// Flow-model rings on a100x64 and a100x128 take very long; they run only with
// OPTIFLOW_BENCH_LARGE_FLOW=1 in the environment.
#include <benchmark/benchmark.h>

#include <algorithm>
#include <cstdint>
#include <cstdlib>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "fixtures.hpp"
#include "optiflow/compiler/compiler.hpp"
#include "optiflow/sim/simulator.hpp"
#include "optiflow/support/sizes.hpp"
#include "optiflow/topology/generators.hpp"

namespace {

using optiflow::schedule::Schedule;
using optiflow::sim::Model;
using optiflow::sim::SimOptions;
using optiflow::sim::Simulator;
using optiflow::topology::Topology;

constexpr std::uint64_t kCandidateSize = std::uint64_t{1} << 30;

using optiflow::bench::read_program;
using optiflow::bench::schedule;
using optiflow::bench::topology;

SimOptions options_for(Model model) {
  SimOptions options;
  options.model = model;
  return options;
}

std::size_t transfers_in(const Schedule& s) {
  std::size_t sends = 0;
  for (const auto& program : s.programs)
    for (const auto& tb : program.tbs)
      for (const auto& step : tb.steps) sends += optiflow::schedule::step_sends(step.kind) ? 1 : 0;
  return sends;
}

void describe(benchmark::State& state, const Schedule& s) {
  state.counters["steps"] = static_cast<double>(s.step_count());
  state.counters["transfers"] = static_cast<double>(transfers_in(s));
  state.counters["chunks"] = s.chunks;
}

// --- Candidates: 32-GPU All-Gather on a100x4, 8 chunks per rank. ---

const std::string& candidate_program(int which) {
  static const std::string multi_ring = read_program("multi-ring.ofl");
  static const std::string pipelined_ring = "pipeline 8\nring over all\n";
  return which == 0 ? multi_ring : pipelined_ring;
}

// explore's default --sizes.
const std::vector<std::uint64_t>& explore_sizes() {
  static const std::vector<std::uint64_t> sizes =
      optiflow::support::parse_sizes(optiflow::support::kDefaultSizes);
  return sizes;
}

void BM_Candidate(benchmark::State& state, int program, Model model) {
  const Topology& topo = topology("a100x4");
  const Schedule& s = schedule("a100x4", candidate_program(program));
  const SimOptions options = options_for(model);
  for (auto _ : state) {
    const Simulator sim(topo, s, options);
    for (std::uint64_t size : explore_sizes()) benchmark::DoNotOptimize(sim.run(size));
  }
  describe(state, s);
  state.counters["sizes"] = static_cast<double>(explore_sizes().size());
  state.counters["candidates_per_s"] =
      benchmark::Counter(static_cast<double>(state.iterations()), benchmark::Counter::kIsRate);
}

void BM_Candidate1G(benchmark::State& state, int program, Model model) {
  const Topology& topo = topology("a100x4");
  const Schedule& s = schedule("a100x4", candidate_program(program));
  const SimOptions options = options_for(model);
  for (auto _ : state) {
    const Simulator sim(topo, s, options);
    benchmark::DoNotOptimize(sim.run(kCandidateSize));
  }
  describe(state, s);
  state.counters["candidates_per_s"] =
      benchmark::Counter(static_cast<double>(state.iterations()), benchmark::Counter::kIsRate);
}

void BM_Construct(benchmark::State& state, int program, Model model) {
  const Topology& topo = topology("a100x4");
  const Schedule& s = schedule("a100x4", candidate_program(program));
  const SimOptions options = options_for(model);
  for (auto _ : state) benchmark::DoNotOptimize(Simulator(topo, s, options));
  describe(state, s);
  state.counters["per_s"] =
      benchmark::Counter(static_cast<double>(state.iterations()), benchmark::Counter::kIsRate);
}

void BM_Run(benchmark::State& state, int program, Model model) {
  const Topology& topo = topology("a100x4");
  const Schedule& s = schedule("a100x4", candidate_program(program));
  const Simulator sim(topo, s, options_for(model));
  for (auto _ : state) benchmark::DoNotOptimize(sim.run(kCandidateSize));
  describe(state, s);
  state.counters["per_s"] =
      benchmark::Counter(static_cast<double>(state.iterations()), benchmark::Counter::kIsRate);
}

// --- Scaling: `ring over all` on a100xK, 8K GPUs, K*8 (K*8 - 1) transfers. ---

void BM_Ring(benchmark::State& state, int nodes, Model model, bool construct) {
  const std::string name = "a100x" + std::to_string(nodes);
  const Topology& topo = topology(name);
  const Schedule& s = schedule(name, "ring over all");
  const SimOptions options = options_for(model);
  if (construct) {
    for (auto _ : state) {
      const Simulator sim(topo, s, options);
      benchmark::DoNotOptimize(sim.run(kCandidateSize));
    }
  } else {
    const Simulator sim(topo, s, options);
    for (auto _ : state) benchmark::DoNotOptimize(sim.run(kCandidateSize));
  }
  describe(state, s);
  state.counters["gpus"] = topo.rank_count();
  // Seconds per transfer (kInvert of a rate): near-constant if the simulator scales linearly.
  state.counters["s_per_transfer"] = benchmark::Counter(
      static_cast<double>(transfers_in(s)) * static_cast<double>(state.iterations()),
      benchmark::Counter::kIsRate | benchmark::Counter::kInvert);
}

// With --benchmark_repetitions, the fastest repetition too: on a shared machine other work only
// ever adds time, so the minimum is the steadiest estimate (bench/ab.sh compares by it).
double fastest(const std::vector<double>& times) {
  return *std::min_element(times.begin(), times.end());
}

template <class... Args>
void add(const std::string& name, benchmark::TimeUnit unit, Args&&... args) {
  benchmark::RegisterBenchmark(name.c_str(), std::forward<Args>(args)...)
      ->Unit(unit)
      ->ComputeStatistics("min", fastest);
}

const bool kRegistered = [] {
  const std::pair<Model, const char*> models[] = {{Model::alpha_beta, "alpha_beta"},
                                                  {Model::flow, "flow"}};
  const char* programs[] = {"multi_ring", "pipeline8_ring"};
  for (const auto& [model, model_name] : models)
    for (int p = 0; p < 2; ++p) {
      const std::string tail = std::string("/") + programs[p] + "/" + model_name;
      add("BM_Candidate" + tail, benchmark::kMicrosecond, BM_Candidate, p, model);
      add("BM_Candidate1G" + tail, benchmark::kMicrosecond, BM_Candidate1G, p, model);
      add("BM_Construct" + tail, benchmark::kMicrosecond, BM_Construct, p, model);
      add("BM_Run" + tail, benchmark::kMicrosecond, BM_Run, p, model);
    }
  const bool large_flow = std::getenv("OPTIFLOW_BENCH_LARGE_FLOW") != nullptr;
  for (const auto& [model, model_name] : models)
    for (int nodes : {1, 4, 16, 64, 128}) {
      if (model == Model::flow && nodes > 16 && !large_flow) continue;
      const std::string tail = "/a100x" + std::to_string(nodes) + "/" + model_name;
      add("BM_RingRun" + tail, benchmark::kMillisecond, BM_Ring, nodes, model, false);
      add("BM_RingConstructAndRun" + tail, benchmark::kMillisecond, BM_Ring, nodes, model, true);
    }
  return true;
}();

}  // namespace
