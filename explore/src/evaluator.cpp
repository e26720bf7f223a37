#include "evaluator.hpp"

#include <algorithm>
#include <chrono>

#include "optiflow/core/compiler.hpp"
#include "optiflow/core/dsl_parser.hpp"
#include "optiflow/core/error.hpp"
#include "optiflow/core/schedule_io.hpp"
#include "optiflow/db/store.hpp"
#include "optiflow/sim/simulator.hpp"

namespace optiflow::explore {
namespace {

constexpr std::size_t kLinkNotes = 3;

std::string first_line(const std::string& text) {
  return text.substr(0, text.find('\n'));
}

}  // namespace

std::string canonical_program(const std::string& source, std::string& diagnostics) {
  try {
    return core::dsl::print_program(core::dsl::parse_program(source, "candidate"));
  } catch (const core::dsl::DslError& e) {
    diagnostics = e.render();
    return {};
  }
}

Compiled compile_candidate(const std::string& canonical, const core::Topology& topology,
                           core::Collective collective) {
  Compiled c;
  const auto start = std::chrono::steady_clock::now();
  try {
    core::CompileOptions options;
    options.collective = collective;
    options.name = "candidate";
    c.schedule = core::compile_program(canonical, "candidate", topology, options).schedule;
    c.schedule_json = core::write_schedule_json(c.schedule);
    c.schedule_hash = db::content_hash(c.schedule_json);
    c.chunks = c.schedule.chunks;
    c.steps = static_cast<std::int64_t>(c.schedule.step_count());
    c.ok = true;
  } catch (const core::dsl::DslError& e) {
    c.diagnostics = e.render();
  } catch (const core::InputError& e) {
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

Simulated simulate_candidate(const core::Schedule& schedule, const core::Topology& topology,
                             const std::vector<std::uint64_t>& sizes) {
  Simulated s;
  const sim::Simulator simulator(topology, schedule);
  for (std::size_t i = 0; i < sizes.size(); ++i) {
    sim::SimResult r = simulator.run(sizes[i]);
    s.time_us.push_back(r.time_us);
    s.algbw_GBps.push_back(r.algbw_GBps);
    s.busbw_GBps.push_back(r.busbw_GBps);
    if (i + 1 != sizes.size()) continue;
    std::stable_sort(r.links.begin(), r.links.end(),
                     [](const auto& a, const auto& b) { return a.utilisation > b.utilisation; });
    auto note = [&](const sim::LinkUsage& u) {
      const core::Link& l = topology.link(u.link);
      return llm::LinkNote{topology.node(l.src).id, topology.node(l.dst).id, u.utilisation};
    };
    for (std::size_t k = 0; k < std::min(kLinkNotes, r.links.size()); ++k) {
      s.busiest_links.push_back(note(r.links[k]));
      s.idle_links.push_back(note(r.links[r.links.size() - 1 - k]));
    }
  }
  return s;
}

}  // namespace optiflow::explore
