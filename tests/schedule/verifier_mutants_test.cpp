// The verifier against a brute-force reference (brute_force.hpp: every interleaving of the
// runtime semantics; a race is two conflicting steps ready at once), on mutants of the shipped
// schedules (compiled example programs on small topologies, MSCCL XML files) with one
// dependency removed or two adjacent steps of a block swapped.
//
// Asserted: the verifier reports a race iff the reference finds one, every race it names is one
// the reference found, and it accepts exactly the race-free mutants that never deadlock and meet
// the postcondition in every execution. MSCCL XML files too big to explore get weaker checks:
// a removed dependency that the other edges still imply changes nothing and must be accepted,
// and every race named must be two steps that no chain of edges orders.
#include <gtest/gtest.h>

#include <algorithm>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <iostream>
#include <iterator>
#include <set>
#include <string>
#include <utility>
#include <vector>

#include "brute_force.hpp"
#include "optiflow/compiler/compiler.hpp"
#include "optiflow/schedule/flat_schedule.hpp"
#include "optiflow/schedule/msccl_xml.hpp"
#include "optiflow/schedule/verifier.hpp"
#include "optiflow/support/error.hpp"
#include "optiflow/topology/generators.hpp"

namespace optiflow::schedule {
namespace {

namespace fs = std::filesystem;

// Brute force is exponential: bases larger than these are left out.
constexpr std::size_t kMaxBaseSteps = 64;
constexpr std::size_t kMaxStates = 20000;

using namespace testing_support;

// ---- Mutants ------------------------------------------------------------------------------

struct Mutant {
  std::string name;
  Schedule schedule;
};

std::string step_name(std::size_t rank, std::size_t tb, std::size_t step) {
  return "rank " + std::to_string(rank) + " tb " + std::to_string(tb) + " step " +
         std::to_string(step);
}

// Each dependency removed; each pair of adjacent steps of a block swapped, the rank's deps
// following the steps they name.
std::vector<Mutant> mutants_of(const Schedule& base) {
  std::vector<Mutant> mutants;
  for (std::size_t r = 0; r < base.programs.size(); ++r) {
    const auto& tbs = base.programs[r].tbs;
    for (std::size_t t = 0; t < tbs.size(); ++t)
      for (std::size_t s = 0; s < tbs[t].steps.size(); ++s) {
        for (std::size_t d = 0; d < tbs[t].steps[s].deps.size(); ++d) {
          Mutant mutant{step_name(r, t, s) + " without dep " + std::to_string(d), base};
          auto& deps = mutant.schedule.programs[r].tbs[t].steps[s].deps;
          deps.erase(deps.begin() + static_cast<std::ptrdiff_t>(d));
          mutants.push_back(std::move(mutant));
        }
        if (s + 1 == tbs[t].steps.size()) continue;
        Mutant mutant{step_name(r, t, s) + " swapped with the next", base};
        RankProgram& program = mutant.schedule.programs[r];
        std::swap(program.tbs[t].steps[s], program.tbs[t].steps[s + 1]);
        const StepRef first{static_cast<std::int32_t>(t), static_cast<std::int32_t>(s)};
        const StepRef second{first.tb, first.step + 1};
        for (ThreadBlock& tb : program.tbs)
          for (Step& step : tb.steps)
            for (StepRef& dep : step.deps)
              dep = dep == first ? second : dep == second ? first : dep;
        mutants.push_back(std::move(mutant));
      }
  }
  return mutants;
}

// ---- Bases --------------------------------------------------------------------------------

struct Base {
  std::string name;
  Schedule schedule;
};

std::vector<Base> compiled_bases() {
  std::vector<Base> bases;
  const fs::path programs = fs::path(OPTIFLOW_SOURCE_DIR) / "datasets" / "programs";
  std::vector<fs::path> files;
  for (const auto& entry : fs::directory_iterator(programs))
    if (entry.path().extension() == ".ofl") files.push_back(entry.path());
  std::sort(files.begin(), files.end());
  constexpr support::Collective kCollectives[] = {support::Collective::all_gather,
                                                  support::Collective::reduce_scatter,
                                                  support::Collective::all_reduce};
  for (const char* name : {"ring3", "ring4", "fullmesh3", "fullmesh4"}) {
    const topology::Topology topo = *topology::make_builtin_topology(name);
    for (const fs::path& file : files)
      for (support::Collective collective : kCollectives) {
        std::ifstream in(file);
        const std::string text((std::istreambuf_iterator<char>(in)), {});
        compiler::CompileOptions options;
        options.collective = collective;
        try {
          Schedule schedule =
              compiler::compile_program(text, file.string(), topo, options).schedule;
          bases.push_back({file.stem().string() + " on " + name + " (" +
                               std::string(to_string(collective)) + ")",
                           std::move(schedule)});
        } catch (const support::InputError&) {
          // Not every program fits every topology (recursive doubling needs 2^k ranks, ...).
          // Anything else, such as a compiled schedule the verifier rejects, fails the test.
        }
      }
  }
  return bases;
}

std::vector<Base> xml_bases() {
  std::vector<Base> bases;
  for (const fs::path& dir : {fs::path(OPTIFLOW_SOURCE_DIR) / "datasets" / "schedules",
                              fs::path(OPTIFLOW_EXTERNAL_DIR)}) {
    if (!fs::is_directory(dir)) continue;  // ../shared/external is optional
    std::vector<fs::path> files;
    for (const auto& entry : fs::recursive_directory_iterator(dir))
      if (entry.path().extension() == ".xml") files.push_back(entry.path());
    std::sort(files.begin(), files.end());
    for (const fs::path& file : files) {
      try {
        bases.push_back({file.filename().string(), read_msccl_xml_file(file.string())});
      } catch (const support::InputError&) {
        // NCCL topology XML and the like: not a schedule.
      }
    }
  }
  return bases;
}

// ---- The comparison -----------------------------------------------------------------------

// "rank R tb T step S (kind)" of each step an error names.
std::vector<std::string> step_labels(const std::string& error) {
  std::vector<std::string> labels;
  for (std::size_t at = error.find(" tb "); at != std::string::npos; at = error.find(" tb ", at)) {
    const std::size_t begin = error.rfind("rank ", at), end = error.find(')', at);
    if (begin == std::string::npos || end == std::string::npos) break;
    labels.push_back(error.substr(begin, end + 1 - begin));
    at = end;
  }
  return labels;
}

std::set<LabelPair> reported_races(const VerifyResult& result) {
  std::set<LabelPair> races;
  for (const std::string& error : result.errors) {
    if (!error.starts_with("race on ")) continue;
    const std::vector<std::string> steps = step_labels(error);
    EXPECT_EQ(steps.size(), 2u) << error;
    if (steps.size() == 2) races.insert(sorted_pair(steps[0], steps[1]));
  }
  return races;
}

struct Tally {
  std::size_t mutants = 0, racy = 0, clean = 0, other_errors = 0, too_big = 0;
  std::size_t only_races = 0;  // racy mutants whose one symbolic execution goes well
};

bool only_races(const VerifyResult& result) {
  return std::ranges::all_of(
      result.errors, [](const std::string& error) { return error.starts_with("race on "); });
}

void compare(const std::string& name, const Schedule& schedule, Tally& tally) {
  SCOPED_TRACE(name);
  const Verdict truth = BruteForce(schedule, kMaxStates).run();
  if (truth.too_big) {
    ++tally.too_big;
    return;
  }
  ++tally.mutants;
  const VerifyResult result = verify_schedule(schedule);
  const std::set<LabelPair> races = reported_races(result);
  EXPECT_FALSE(truth.values_depend_on_order && truth.races.empty())
      << "the reference itself is inconsistent";
  if (!truth.races.empty()) {
    ++tally.racy;
    if (only_races(result)) ++tally.only_races;
    EXPECT_FALSE(result.ok());
    EXPECT_FALSE(races.empty()) << "the reference finds races, e.g. " << truth.races.begin()->first
                                << " / " << truth.races.begin()->second << "; the verifier says:\n"
                                << result.summary();
    for (const LabelPair& race : races)
      EXPECT_TRUE(truth.races.contains(race))
          << "reported race " << race.first << " / " << race.second
          << " is not one: the reference never has both steps ready at once";
    return;
  }
  EXPECT_TRUE(races.empty()) << "the reference finds no race; the verifier says:\n"
                             << result.summary();
  if (truth.clean()) {
    ++tally.clean;
    EXPECT_TRUE(result.ok()) << result.summary();
  } else {
    ++tally.other_errors;
    EXPECT_FALSE(result.ok()) << "the reference finds a "
                              << (truth.deadlock ? "deadlock" : "wrong result");
  }
}

// The bases small enough to explore; the others are listed in `skipped`.
std::vector<Base> explorable(std::vector<Base> bases, std::vector<std::string>& skipped) {
  std::vector<Base> kept;
  for (Base& base : bases) {
    EXPECT_TRUE(verify_schedule(base.schedule).ok()) << base.name;  // shipped ones are correct
    const bool small = base.schedule.step_count() <= kMaxBaseSteps && base.schedule.ranks <= 64 &&
                       !BruteForce(base.schedule, kMaxStates).run().too_big;
    if (small)
      kept.push_back(std::move(base));
    else
      skipped.push_back(base.name + " (" + std::to_string(base.schedule.step_count()) + " steps)");
  }
  return kept;
}

TEST(VerifierMutants, AgreeWithBruteForceOnEveryInterleaving) {
  std::vector<std::string> skipped;
  const std::vector<Base> compiled = explorable(compiled_bases(), skipped);
  const std::vector<Base> xml = explorable(xml_bases(), skipped);
  Tally tally;
  for (const std::vector<Base>* bases : {&compiled, &xml})
    for (const Base& base : *bases)
      for (const Mutant& mutant : mutants_of(base.schedule))
        compare(base.name + ": " + mutant.name, mutant.schedule, tally);
  std::cout << "[ mutants  ] bases: " << compiled.size() << " compiled, " << xml.size()
            << " MSCCL XML; " << skipped.size() << " too big for brute force\n"
            << "[ mutants  ] " << tally.mutants << " mutants: " << tally.racy << " racy ("
            << tally.only_races << " of them with races as the only errors), " << tally.clean
            << " correct, " << tally.other_errors << " otherwise wrong; " << tally.too_big
            << " too big\n";
  for (const std::string& name : skipped)
    if (name.find(".xml") != std::string::npos)
      std::cout << "[ mutants  ] skipped " << name << "\n";
  EXPECT_GE(compiled.size(), 40u);
  EXPECT_GE(tally.racy, 100u);
  EXPECT_GE(tally.clean, 50u);
}

// ---- Large schedules: what can be checked without brute force ------------------------------

// Whether a chain of order edges (block order, deps, matched messages) leads from x to y: a plain
// search over the whole flattened schedule, for a few checks on schedules too big to explore.
bool reaches(const FlatSchedule& flat, StepId x, StepId y) {
  std::vector<bool> seen(flat.step_count(), false);
  std::vector<StepId> stack{x};
  while (!stack.empty()) {
    const StepId at = stack.back();
    stack.pop_back();
    if (at == y) return true;
    std::vector<StepId> next(flat.dependents(at).begin(), flat.dependents(at).end());
    if (at + 1 < flat.block_of(at).end) next.push_back(at + 1);
    if (flat.matching_receive(at) != kNoStep) next.push_back(flat.matching_receive(at));
    for (StepId step : next)
      if (!seen[step]) {
        seen[step] = true;
        stack.push_back(step);
      }
  }
  return false;
}

StepId step_of(const FlatSchedule& flat, const std::string& label) {
  int rank = -1, tb = -1, step = -1;
  EXPECT_EQ(std::sscanf(label.c_str(), "rank %d tb %d step %d", &rank, &tb, &step), 3) << label;
  return flat.id_of(rank, {tb, step});
}

// On every MSCCL XML file too big for brute force, each dependency removed: when the remaining
// edges still imply it, the mutant runs exactly as its base and must be verified; and every race
// the verifier names must be two steps that no chain orders.
TEST(VerifierMutants, LargeXmlMutantsKeepWhatTheOrderStillImplies) {
  std::size_t mutants = 0, implied = 0, accepted = 0, races_checked = 0;
  for (const Base& base : xml_bases()) {
    SCOPED_TRACE(base.name);
    if (!verify_schedule(base.schedule).ok()) continue;
    for (const Mutant& mutant : mutants_of(base.schedule)) {
      if (mutant.name.find("without dep") == std::string::npos) continue;
      ++mutants;
      const VerifyResult result = verify_schedule(mutant.schedule);
      accepted += result.ok() ? 1 : 0;
      const FlatSchedule flat(mutant.schedule, UnpairedMessages::keep);
      int rank = -1, tb = -1, step = -1, dep = -1;
      std::sscanf(mutant.name.c_str(), "rank %d tb %d step %d without dep %d", &rank, &tb, &step,
                  &dep);
      const StepRef removed = base.schedule.programs[static_cast<std::size_t>(rank)]
                                  .tbs[static_cast<std::size_t>(tb)]
                                  .steps[static_cast<std::size_t>(step)]
                                  .deps[static_cast<std::size_t>(dep)];
      if (reaches(flat, flat.id_of(rank, removed), flat.id_of(rank, {tb, step}))) {
        ++implied;
        EXPECT_TRUE(result.ok()) << mutant.name << ": its removed dependency is still implied\n"
                                 << result.summary();
      }
      for (const auto& [first, second] : reported_races(result)) {
        ++races_checked;
        const StepId x = step_of(flat, first), y = step_of(flat, second);
        EXPECT_FALSE(reaches(flat, x, y) || reaches(flat, y, x))
            << mutant.name << ": " << first << " and " << second << " are ordered";
      }
    }
  }
  std::cout << "[ mutants  ] large MSCCL XML: " << mutants << " dependency removals, " << accepted
            << " verified (" << implied << " with the dependency still implied), " << races_checked
            << " reported races confirmed unordered\n";
  if (mutants == 0) GTEST_SKIP() << "no MSCCL XML file with dependencies";
}

}  // namespace
}  // namespace optiflow::schedule
