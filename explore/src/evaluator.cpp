#include "evaluator.hpp"

#include <algorithm>
#include <chrono>

#include "optiflow/compiler/compiler.hpp"
#include "optiflow/dsl/parser.hpp"
#include "optiflow/schedule/schedule_io.hpp"
#include "optiflow/sim/simulator.hpp"
#include "optiflow/support/error.hpp"
#include "optiflow/support/sizes.hpp"

namespace optiflow::explore {
namespace {

constexpr std::size_t kLinkNotes = 3;
constexpr int kPathRanks = 12;  // ranks of a critical path a proposer is shown

std::string first_line(const std::string& text) {
  return text.substr(0, text.find('\n'));
}

}  // namespace

Parsed parse_candidate(const std::string& source) {
  Parsed parsed;
  try {
    parsed.program = dsl::parse_program(source, "candidate");
    parsed.canonical = dsl::print_program(*parsed.program);
    if (parsed.canonical != source)
      parsed.program = dsl::parse_program(parsed.canonical, "candidate");
  } catch (const dsl::DslError& e) {
    parsed.program.reset();
    parsed.canonical.clear();
    parsed.diagnostics = e.render();
  }
  return parsed;
}

Compiled compile_candidate(const Parsed& parsed, const topology::Topology& topology,
                           support::Collective collective, const CandidateBudget& budget) {
  Compiled c;
  if (!parsed.program) {
    c.diagnostics = parsed.diagnostics;
    return c;
  }
  const auto start = std::chrono::steady_clock::now();
  try {
    compiler::CompileOptions options;
    options.collective = collective;
    options.name = "candidate";
    options.limits = budget.limits;
    options.time_limit_s = budget.time_limit_s;
    c.schedule =
        compiler::compile(*parsed.program, topology, options, "candidate", parsed.canonical)
            .schedule;
    c.schedule_hash = schedule::schedule_hash(c.schedule);
    c.chunks = c.schedule.chunks;
    c.steps = static_cast<std::int64_t>(c.schedule.step_count());
    c.ok = true;
  } catch (const dsl::DslError& e) {
    c.diagnostics = e.render();
  } catch (const support::InputError& e) {
    c.diagnostics = first_line(e.what());
  } catch (const std::bad_alloc&) {
    c.diagnostics = "candidate: error: out of memory while compiling";
  } catch (const std::exception& e) {  // a compiler bug must not end the exploration
    c.diagnostics = first_line(e.what());
  }
  c.compile_ms =
      std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - start).count();
  return c;
}

Compiled Compiled::light() const {
  Compiled copy;
  copy.ok = ok;
  copy.diagnostics = diagnostics;
  copy.compile_ms = compile_ms;
  copy.schedule_hash = schedule_hash;
  copy.chunks = chunks;
  copy.steps = steps;
  return copy;
}

namespace {

// "at 1K: 15 steps through ranks 0 1 2 ...": how long the chain that sets the time is, and
// where it runs (a proposer sees rounds at small sizes, a bottleneck path at large ones).
std::string critical_path_note(const sim::SimResult& r) {
  std::string ranks;
  int shown = 0, previous = -1;
  for (const sim::CriticalStep& step : r.critical_path) {
    if (step.rank == previous) continue;
    previous = step.rank;
    if (++shown > kPathRanks) {
      ranks += " ...";
      break;
    }
    ranks += " " + std::to_string(step.rank);
  }
  return "at " + support::format_size(r.size_bytes) + ": " +
         std::to_string(r.critical_path.size()) + " steps through ranks" + ranks;
}

}  // namespace

Simulated simulate_candidate(const schedule::Schedule& schedule, const topology::Topology& topology,
                             const Reference& reference) {
  std::vector<sim::SimResult> results = sweep(sim::Simulator(topology, schedule), reference);
  Simulated s;
  s.results.assign(results.begin(), results.end());
  if (results.empty()) return s;
  s.critical_path = critical_path_note(results.front());
  if (results.size() > 1) s.critical_path += "; " + critical_path_note(results.back());
  std::vector<sim::LinkUsage>& links = results.back().links;
  std::stable_sort(links.begin(), links.end(),
                   [](const auto& a, const auto& b) { return a.utilisation > b.utilisation; });
  auto note = [&](const sim::LinkUsage& u) {
    const topology::Link& l = topology.link(u.link);
    return propose::LinkNote{topology.node(l.src).id, topology.node(l.dst).id, u.utilisation};
  };
  for (std::size_t k = 0; k < std::min(kLinkNotes, links.size()); ++k) {
    s.busiest_links.push_back(note(links[k]));
    s.idle_links.push_back(note(links[links.size() - 1 - k]));
  }
  return s;
}

}  // namespace optiflow::explore
