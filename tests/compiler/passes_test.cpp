// The passes on their own: the fast ways pipeline and all_reduce find overlapping data give
// exactly what comparing every pair would; routes are stored once per path; check_plan and
// assign_chunks report broken plans as compiler bugs. The pass table: its names, the runner's
// checks after structural passes, its deadline, and verify run only when asked.
#include "passes.hpp"

#include <gtest/gtest.h>

#include <algorithm>
#include <chrono>
#include <set>
#include <stdexcept>
#include <string>
#include <vector>

#include "optiflow/compiler/evaluate.hpp"
#include "optiflow/dsl/parser.hpp"
#include "optiflow/topology/generators.hpp"
#include "pass_table.hpp"

namespace optiflow::compiler {
namespace {

bool overlaps(const Interval& a, const Interval& b) {
  return a.begin < b.end && b.begin < a.end;
}

Plan evaluated(const std::string& text, const topology::Topology& topo) {
  return evaluate(dsl::parse_program(text, "test.ofl"), topo, "test.ofl", text);
}

std::vector<std::int32_t> deps_of(const Plan& plan, std::size_t t) {
  return {plan.deps[t].begin(), plan.deps[t].end()};
}

// Programs whose pieces are cut and forwarded in different ways, pipelined unevenly.
const char* const kPrograms[] = {
    "pipeline 3\nring over all",
    "pipeline 4\nsplit { weight 0.7 { bfs over all } weight 0.3 { bruck over all } }",
    "pipeline 2\nsplit 3 as r { scatter over hosts; rd over rails; direct over hosts }",
    "pipeline 5\ndbtree over all",
    "direct over all",
};

TEST(Passes, PipelineDependsOnExactlyTheOverlappingSlices) {
  const topology::Topology topo = topology::make_a100(2);
  for (const char* text : kPrograms) {
    SCOPED_TRACE(text);
    const Plan whole = evaluated(text, topo);
    Plan sliced = whole;
    passes::pipeline(sliced);
    const auto k = static_cast<std::size_t>(whole.pipeline);
    ASSERT_EQ(sliced.transfers.size(), whole.transfers.size() * k);
    for (std::size_t t = 0; t < whole.transfers.size(); ++t)
      for (std::size_t s = 0; s < k; ++s) {
        const std::size_t slice = t * k + s;
        std::vector<std::int32_t> expected;
        for (std::int32_t d : whole.deps[t])
          for (std::size_t ds = 0; ds < k; ++ds) {
            const std::size_t candidate = static_cast<std::size_t>(d) * k + ds;
            if (overlaps(sliced.transfers[candidate].data, sliced.transfers[slice].data))
              expected.push_back(static_cast<std::int32_t>(candidate));
          }
        EXPECT_EQ(deps_of(sliced, slice), expected) << "slice " << slice;
      }
  }
}

TEST(Passes, AllReduceRootsWaitForExactlyTheReductionsIntoTheirData) {
  const topology::Topology topo = topology::make_a100(2);
  const std::string source = "test.ofl";
  for (const char* text : kPrograms) {
    SCOPED_TRACE(text);
    const std::string program(text);
    Plan ag = evaluated(program, topo);
    passes::pipeline(ag);
    const Plan ar = passes::all_reduce(ag, EvalLimits{}, passes::ProgramText{source, program});
    const std::size_t n = ag.transfers.size();
    ASSERT_EQ(ar.transfers.size(), 2 * n);
    for (std::size_t t = 0; t < n; ++t) {
      const Transfer& x = ag.transfers[t];
      std::vector<std::int32_t> expected;
      if (ag.deps[t].empty()) {
        for (std::size_t r = 0; r < n; ++r)
          if (ar.transfers[r].dst == x.src && overlaps(ar.transfers[r].data, x.data))
            expected.push_back(static_cast<std::int32_t>(r));
      } else {
        for (std::int32_t d : ag.deps[t]) expected.push_back(d + static_cast<std::int32_t>(n));
      }
      EXPECT_EQ(deps_of(ar, n + t), expected) << "transfer " << t;
    }
  }
}

TEST(Passes, RoutesAreStoredOncePerPath) {
  const topology::Topology topo = topology::make_a100(2);
  Plan plan = evaluated("pipeline 4\nring over all", topo);
  passes::pipeline(plan);
  passes::assign_chunks(plan, EvalLimits{}.max_chunks);
  const std::string source = "test.ofl", text;
  passes::route(plan, topo, passes::ProgramText{source, text});
  std::set<std::pair<std::int32_t, std::int32_t>> pairs;
  for (const Transfer& t : plan.transfers) pairs.insert({t.src, t.dst});
  EXPECT_EQ(plan.routes.size(), pairs.size());
  EXPECT_EQ(passes::check_plan(plan, &topo), "");
}

TEST(Passes, CheckPlanFindsBrokenRoutesAndForwardDependencies) {
  const topology::Topology topo = topology::make_a100(2);
  Plan plan = evaluated("ring over all", topo);
  passes::assign_chunks(plan, EvalLimits{}.max_chunks);
  const std::string source = "test.ofl", text;
  passes::route(plan, topo, passes::ProgramText{source, text});
  Plan misrouted = plan;
  misrouted.transfers[0].route = plan.transfers[1].route;
  EXPECT_NE(passes::check_plan(misrouted, &topo).find("route ends elsewhere"), std::string::npos);

  Plan forward = plan;
  forward.deps = IndexLists();
  for (std::size_t t = 0; t < plan.transfers.size(); ++t) {
    const std::vector<std::int32_t> self{static_cast<std::int32_t>(t)};
    forward.deps.push_back(self);
  }
  EXPECT_NE(passes::check_plan(forward, nullptr).find("depends on a later transfer"),
            std::string::npos);
}

TEST(Passes, ChunksBeyondWhatEvaluationAllowedAreAnInternalError) {
  Plan plan = evaluated("split 3 as r { ring over all }", topology::make_ring(4));
  EXPECT_THROW(passes::assign_chunks(plan, 4), InternalError);
  passes::assign_chunks(plan, EvalLimits{}.max_chunks);
  EXPECT_EQ(plan.chunks, 12);
}

// ---- The pass table and its runner ---------------------------------------------------------

std::vector<std::string> names_of(const std::vector<PassReport>& reports) {
  std::vector<std::string> names;
  for (const PassReport& report : reports) names.push_back(report.name);
  return names;
}

// `optiflow compile --passes`, the compile-scaling bench and the scale test print these names.
TEST(PassTable, NamesThePassesInPipelineOrder) {
  std::vector<std::string> names;
  for (const passes::PassInfo& pass : passes::kPasses) names.emplace_back(pass.name);
  EXPECT_EQ(names,
            (std::vector<std::string>{"expand", "pipeline", "mirror", "chunks", "coalesce", "route",
                                      "order", "channels", "protocols", "emit", "verify"}));
}

TEST(PassTable, ACompileReportsEachPassItRanAndVerifiesOnlyWhenAsked) {
  const topology::Topology topo = topology::make_a100(2);
  CompileOptions options;
  options.collective = support::Collective::all_reduce;
  const Compilation verified = compile_program("pipeline 2\nring over all", "t.ofl", topo, options);
  std::vector<std::string> all;
  for (const passes::PassInfo& pass : passes::kPasses) all.emplace_back(pass.name);
  EXPECT_EQ(names_of(verified.passes), all);
  // Verification frees the plan first; its report still counts the plan's transfers.
  ASSERT_EQ(verified.passes.size(), passes::kPasses.size());
  EXPECT_EQ(verified.passes.back().transfers,
            verified.passes[verified.passes.size() - 2].transfers);
  EXPECT_EQ(verified.passes.back().transfers, 2u * 2u * 16u * 15u);
  EXPECT_TRUE(verified.plan.transfers.empty());

  options.verify = false;
  options.keep_plan = true;
  const Compilation unverified =
      compile_program("pipeline 2\nring over all", "t.ofl", topo, options);
  all.pop_back();
  EXPECT_EQ(names_of(unverified.passes), all);
  EXPECT_EQ(unverified.plan.transfers.size(), verified.passes.back().transfers);
  EXPECT_EQ(unverified.schedule.step_count(), verified.schedule.step_count());
}

// The pieces of one compile that the runner needs; each test runs a table of its own passes.
struct RunnerFixture {
  const topology::Topology topo = topology::make_ring(4);
  const std::string source = "t.ofl", text = "ring over all";
  const dsl::Program program = dsl::parse_program(text, source);
  CompileOptions options;
  EvalLimits limits;
  passes::CompileState state{program, topo, options, limits, {source, text}};
};

void send_to_self(passes::CompileState& state) {
  state.plan.transfers[0].dst = state.plan.transfers[0].src;
}

TEST(PassRunner, ChecksThePlanAfterAStructuralPassAndNamesIt) {
  RunnerFixture f;
  const auto later = std::chrono::steady_clock::now() + std::chrono::hours(1);
  const passes::PassInfo broken_values[] = {
      {"expand", &passes::expand_pass, passes::Changes::structure, "the program's transfers"},
      {"self", &send_to_self, passes::Changes::values, "unchecked"}};
  EXPECT_EQ(passes::run_passes(broken_values, f.state, later).size(), 2u);

  RunnerFixture g;
  const passes::PassInfo broken_structure[] = {
      {"expand", &passes::expand_pass, passes::Changes::structure, "the program's transfers"},
      {"self", &send_to_self, passes::Changes::structure, "checked"}};
  try {
    passes::run_passes(broken_structure, g.state, later);
    ADD_FAILURE() << "expected the plan check to fail";
  } catch (const InternalError& e) {
    EXPECT_NE(std::string(e.what()).find("after pass 'self'"), std::string::npos) << e.what();
    EXPECT_NE(std::string(e.what()).find("bad endpoints"), std::string::npos) << e.what();
  }
}

TEST(PassRunner, StartsNoPassPastTheDeadlineAndSkipsDisabledOnes) {
  RunnerFixture f;
  const passes::PassInfo table[] = {
      {"expand", &passes::expand_pass, passes::Changes::structure, "the program's transfers"},
      {"verify", &passes::verify_pass, passes::Changes::none, "off", &passes::verifying}};
  f.options.verify = false;
  const auto later = std::chrono::steady_clock::now() + std::chrono::hours(1);
  EXPECT_EQ(names_of(passes::run_passes(table, f.state, later)),
            (std::vector<std::string>{"expand"}));
  RunnerFixture g;
  try {
    passes::run_passes(table, g.state, std::chrono::steady_clock::now() - std::chrono::seconds(1));
    ADD_FAILURE() << "expected the deadline to stop it";
  } catch (const std::runtime_error& e) {
    EXPECT_NE(std::string(e.what()).find("before pass 'expand', with 0 transfers"),
              std::string::npos)
        << e.what();
  }
}

}  // namespace
}  // namespace optiflow::compiler
