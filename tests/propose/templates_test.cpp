// The offline proposer's templates: the rail-balancing programs for rails of unequal bandwidth.
#include "templates.hpp"

#include <gtest/gtest.h>

#include <algorithm>
#include <iostream>
#include <string>
#include <vector>

#include "optiflow/compiler/compiler.hpp"
#include "optiflow/dsl/parser.hpp"
#include "optiflow/sim/simulator.hpp"
#include "optiflow/support/sizes.hpp"
#include "optiflow/topology/bounds.hpp"
#include "optiflow/topology/generators.hpp"
#include "optiflow/topology/variation.hpp"

namespace optiflow::propose {
namespace {

std::vector<std::string> balanced(const topology::Topology& topo) {
  ProposalContext context;
  context.topology = &topo;
  std::vector<std::string> found;
  for (std::string& program : template_programs(context))
    if (program.find("scatter over hosts\n    ring over rails") != std::string::npos)
      found.push_back(std::move(program));
  return found;
}

TEST(TemplatesTest, ASlowNicsRailCarriesAShareInProportionToItsBandwidthOverItsOwnNics) {
  const topology::Topology topo = topology::make_a100x4_degraded();
  const auto programs = balanced(topo);
  // Per rail and per GPU (the linear program), each with direct or ring inside hosts and a
  // deep or a shallow pipeline.
  ASSERT_EQ(programs.size(), 8u);
  // Rail 3 runs at a quarter of the others: GPU 3 keeps w = 8/29 of its share on it (so that
  // rail 3 carries 8/29 of a share per host against 32/29 on the others) and scatters the rest;
  // the deep pipeline writes it with at most 8 parts, 1/4.
  const std::string& deep = programs[0];
  const std::string& shallow = programs[1];
  EXPECT_NE(shallow.find("pipeline 8\n"), std::string::npos) << shallow;
  EXPECT_NE(shallow.find("weight (local == 3 ? 8 : 29)"), std::string::npos) << shallow;
  EXPECT_NE(shallow.find("weight (local == 3 ? 21 : 0)"), std::string::npos) << shallow;
  EXPECT_NE(deep.find("weight (local == 3 ? 1 : 4)"), std::string::npos) << deep;
  EXPECT_NE(deep.find("weight (local == 3 ? 3 : 0)"), std::string::npos) << deep;
  // The router would take h1.gpu3's traffic around its slow NIC, onto another rail.
  EXPECT_NE(deep.find("route 11 -> 3 via @\"h1.nic3\" @\"leaf3\" @\"h0.nic3\""), std::string::npos)
      << deep;
  EXPECT_NE(deep.find("route 19 -> 11 via @\"h2.nic3\" @\"leaf3\" @\"h1.nic3\""), std::string::npos)
      << deep;
  // The linear program's keeps differ by host: h3 (no ring neighbour of h1) keeps none on rail 3.
  const std::string& per_gpu = programs[4];
  EXPECT_NE(per_gpu.find("rank == 27 ? 0"), std::string::npos) << per_gpu;

  const std::uint64_t size = std::uint64_t{1} << 30;
  const double bound_us =
      topology::LowerBound::compute(topo, support::Collective::all_gather).at(size).time_us;
  for (const std::string& program : programs) {
    const auto compiled = compiler::compile_program(program, "balanced", topo, {});
    const double time_us = sim::Simulator(topo, compiled.schedule).run(size).time_us;
    EXPECT_LT(time_us / bound_us, 1.06) << program;
  }
  const auto deep_compiled = compiler::compile_program(deep, "balanced", topo, {});
  EXPECT_LT(sim::Simulator(topo, deep_compiled.schedule).run(size).time_us / bound_us, 1.03);
}

// On clusters with faults drawn at random, every rail-balancing program compiles: its weights
// are written with few enough parts for the compiler's chunk limit.
TEST(TemplatesTest, RailBalancingCompilesOnVariedClusters) {
  int seen = 0;
  for (std::uint64_t seed = 1; seed <= 3; ++seed)
    for (int faults = 1; faults <= 3; ++faults) {
      const topology::Topology topo =
          topology::draw_faults(topology::make_a100(4), seed, faults).topology;
      for (const std::string& program : balanced(topo)) {
        ++seen;
        EXPECT_NO_THROW(compiler::compile_program(program, "balanced", topo, {}))
            << topo.name() << "\n"
            << program;
      }
    }
  EXPECT_GT(seen, 0);
}

// The lower bound holds for every program the offline proposer starts from, at every size and
// in both link models: a bound that a schedule beats is not a bound. (Multi-host clusters are
// where the bound counts the network's step latency, not NVLink's.)
TEST(TemplatesTest, NoTemplateBeatsTheLowerBound) {
  const std::vector<std::uint64_t> sizes = {1 << 10, 64 << 10, 1 << 20, 16 << 20, 1 << 30};
  for (const topology::Topology& topo : {topology::make_a100(2), topology::make_h100(2),
                                         topology::make_ndv2(2), topology::make_dgx1()}) {
    ProposalContext context;
    context.topology = &topo;
    for (const auto collective :
         {support::Collective::all_gather, support::Collective::reduce_scatter,
          support::Collective::all_reduce}) {
      const auto bound = topology::LowerBound::compute(topo, collective);
      compiler::CompileOptions options;
      options.collective = collective;
      for (const std::string& program : template_programs(context)) {
        compiler::Compilation compiled;
        try {
          compiled = compiler::compile_program(program, "template", topo, options);
        } catch (const dsl::DslError&) {
          continue;  // a template for another shape (rd over 3 hosts)
        }
        for (const auto model : {sim::Model::alpha_beta, sim::Model::flow}) {
          sim::SimOptions sim_options;
          sim_options.model = model;
          const sim::Simulator simulator(topo, compiled.schedule, sim_options);
          for (std::uint64_t size : sizes)
            EXPECT_GE(simulator.run(size).time_us, bound.at(size).time_us * (1 - 1e-9))
                << topo.name() << " " << support::to_string(collective) << " "
                << support::format_size(size) << "\n"
                << program;
        }
      }
    }
  }
}

TEST(TemplatesTest, RailsOfEqualBandwidthNeedNoBalancing) {
  EXPECT_TRUE(balanced(topology::make_a100(4)).empty());
  EXPECT_TRUE(balanced(topology::make_dgx1()).empty());
}

}  // namespace
}  // namespace optiflow::propose
