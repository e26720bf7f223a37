#include "optiflow/explore/compare.hpp"

#include <chrono>
#include <cstdio>
#include <ctime>
#include <limits>
#include <nlohmann/json.hpp>
#include <set>

#include "optiflow/baselines/baseline.hpp"
#include "optiflow/db/store.hpp"
#include "optiflow/explore/sweep.hpp"
#include "optiflow/schedule/schedule_io.hpp"
#include "optiflow/support/error.hpp"
#include "optiflow/support/parse_support.hpp"
#include "optiflow/support/sizes.hpp"
#include "optiflow/topology/bounds.hpp"
#include "optiflow/topology/topology_io.hpp"

namespace optiflow::explore {
namespace {

using Clock = std::chrono::steady_clock;

[[noreturn]] void fail(const std::string& option, const std::string& message) {
  throw support::OptionError(option, message);
}

double seconds_since(Clock::time_point start) {
  return std::chrono::duration<double>(Clock::now() - start).count();
}

// Seconds between two of the store's ISO 8601 UTC times; 0 when either is missing.
double seconds_between(const std::string& from, const std::string& to) {
  auto parse = [](const std::string& text) -> std::optional<double> {
    std::tm tm{};
    int millis = 0;
    if (std::sscanf(text.c_str(), "%d-%d-%dT%d:%d:%d.%dZ", &tm.tm_year, &tm.tm_mon, &tm.tm_mday,
                    &tm.tm_hour, &tm.tm_min, &tm.tm_sec, &millis) < 6)
      return std::nullopt;
    tm.tm_year -= 1900;
    tm.tm_mon -= 1;
    return static_cast<double>(timegm(&tm)) + millis / 1000.0;
  };
  const auto a = parse(from), b = parse(to);
  return a && b ? *b - *a : 0;
}

Contender simulate(const std::string& name, const schedule::Schedule& schedule,
                   const topology::Topology& topo, const Reference& reference,
                   const CompareOptions& options) {
  sim::SimOptions sim_options;
  sim_options.model = options.model;
  Contender c;
  c.name = name;
  for (const sim::SimResult& r : sweep(sim::Simulator(topo, schedule, sim_options), reference)) {
    c.results.push_back(r);
    c.choices.emplace_back(topology::to_string(r.protocol));
  }
  return c;
}

// "ours": per size, the fastest of the schedules stored as winners of earlier explorations.
Contender ours(const db::Store& store, const topology::Topology& topo, const Reference& reference,
               const CompareOptions& options) {
  db::HistoryFilter filter;
  filter.topology = topo.name();
  filter.collective = std::string(support::to_string(options.collective));
  const std::vector<db::BestEntry> best = store.best(filter);
  Contender c;
  c.name = "ours";
  c.results.resize(reference.sizes.size());
  c.choices.resize(reference.sizes.size());
  std::set<std::string> simulated;  // schedule hashes
  std::int64_t largest_run = 0;
  for (const db::BestEntry& entry : best) {
    largest_run = entry.run_id;  // best() is by ascending size
    if (!simulated.insert(entry.schedule_hash).second) continue;
    const auto json = store.schedule_json(entry.schedule_hash);
    if (!json) continue;
    const Contender one =
        simulate("ours", schedule::parse_schedule_json(*json, "schedule " + entry.schedule_hash),
                 topo, reference, options);
    for (std::size_t s = 0; s < one.results.size(); ++s)
      if (c.results[s].time_us == 0 || one.results[s].time_us < c.results[s].time_us) {
        c.results[s] = one.results[s];
        c.choices[s] = "program #" + std::to_string(entry.program_id) + " (" + one.choices[s] + ")";
      }
  }
  if (simulated.empty() || c.results.front().time_us == 0)
    fail("with", "no stored schedules for 'ours' on " + topo.name() + " (" + filter.collective +
                     ") in " + options.db_path +
                     ": run optiflow explore first, or name a program file");
  if (const auto run = store.run(largest_run)) {
    c.synthesis_s = seconds_between(run->started_at, run->finished_at);
    c.status = "best stored per size (" + std::to_string(simulated.size()) +
               " schedules); time: exploration run " + std::to_string(largest_run);
  }
  return c;
}

Contender baseline(const std::string& name, const topology::Topology& topo,
                   const Reference& reference, const CompareOptions& options) {
  sim::SimOptions sim_options;
  sim_options.model = options.model;
  const auto start = Clock::now();
  baselines::SynthesisOptions synthesis;
  synthesis.time_limit_s = options.synthesis_time_limit_s;
  synthesis.progress = options.progress;
  const baselines::BaselineRun run = baselines::run_baseline(
      name, topo, options.collective, reference.sizes, sim_options, synthesis);
  Contender c;
  c.name = name;
  c.synthesis_s = seconds_since(start);
  c.status = "construction, verification and simulation";
  if (run.solver) {  // a synthesizer: its own time, and how its solver ended
    c.synthesis_s = run.solver->seconds;
    c.status = run.solver->summary();
  }
  for (std::size_t s = 0; s < run.rows.size(); ++s) {
    c.results.push_back(run.rows[s].sim);
    c.results.back().bound_us = reference.bound_us[s];
    c.choices.push_back(run.rows[s].algorithm + "/" +
                        std::string(topology::to_string(run.rows[s].protocol)));
  }
  return c;
}

db::ComparisonContender stored(const Contender& c, const schedule::Schedule* schedule) {
  db::ComparisonContender row;
  row.name = c.name;
  row.synthesis_s = c.synthesis_s;
  row.status = c.status;
  if (schedule) {
    row.schedule_json = schedule::write_schedule_json(*schedule);
    row.schedule_chunks = schedule->chunks;
    row.schedule_steps = static_cast<std::int64_t>(schedule->step_count());
  }
  row.results = c.results;
  row.choices = c.choices;
  return row;
}

}  // namespace

namespace {

// The contender `name` and, for a schedule the caller brought, that schedule (to be stored).
std::pair<Contender, const schedule::Schedule*> contender(
    const std::string& name, const topology::Topology& topo, const Reference& reference,
    const CompareOptions& options, const std::function<db::Store&()>& store) {
  if (name == "ours") return {ours(store(), topo, reference, options), nullptr};
  const auto file = std::find_if(options.schedules.begin(), options.schedules.end(),
                                 [&](const auto& s) { return s.name == name; });
  if (file != options.schedules.end()) {
    Contender c = simulate(name, file->schedule, topo, reference, options);
    c.synthesis_s = file->synthesis_s;
    c.status = file->status;
    return {std::move(c), &file->schedule};
  }
  if (baselines::is_baseline(name)) return {baseline(name, topo, reference, options), nullptr};
  fail("with", "unknown contender '" + name +
                   "': ours, a baseline (optiflow baseline --help) or a schedule file");
}

std::int64_t record(db::Store& db, const topology::Topology& topo, const CompareOptions& options,
                    std::vector<db::ComparisonContender> rows) {
  db::ComparisonRecord record;
  record.topology_id = db.put_topology(topo.name(), topology::write_topology_json(topo));
  record.collective = std::string(support::to_string(options.collective));
  record.model = std::string(sim::to_string(options.model));
  record.options_json = nlohmann::json{
      {"topology", options.topology},
      {"sizes", options.sizes},
      {"with",
       options.with}}.dump();
  record.contenders = std::move(rows);
  return db.record_comparison(record);
}

}  // namespace

Comparison compare(const CompareOptions& given) {
  CompareOptions options = given;
  options.sizes = sizes_or_default(options.sizes);
  const topology::Topology topo = topology::load_topology(options.topology);
  sim::SimOptions sim_options;
  sim_options.model = options.model;
  const Reference reference =
      Reference::compute(topo, options.collective, options.sizes, sim_options);
  Comparison result;
  result.topology = topo.name();
  result.collective = options.collective;
  result.model = options.model;
  result.ranks = topo.rank_count();
  result.sizes = options.sizes;
  result.bound_us = reference.bound_us;
  for (const propose::NcclAtSize& nccl : reference.nccl) result.nccl_us.push_back(nccl.time_us);

  std::optional<db::Store> store;
  const std::function<db::Store&()> open_store = [&]() -> db::Store& {
    if (!store) store = db::Store::open(options.db_path);
    return *store;
  };
  std::vector<db::ComparisonContender> rows;
  for (const std::string& name : options.with) {
    auto [c, schedule] = contender(name, topo, reference, options, open_store);
    rows.push_back(stored(c, schedule));
    result.contenders.push_back(std::move(c));
  }
  if (options.store) result.id = record(open_store(), topo, options, std::move(rows));
  return result;
}

namespace {

std::optional<double> vs_nccl(const Comparison& c, std::size_t s, const support::SizeResult& p) {
  if (s >= c.nccl_us.size()) return std::nullopt;
  return c.nccl_us[s] / p.time_us;
}

}  // namespace

std::string comparison_json(const Comparison& c) {
  nlohmann::ordered_json doc;
  doc["topology"] = c.topology;
  doc["collective"] = support::to_string(c.collective);
  doc["model"] = sim::to_string(c.model);
  doc["ranks"] = c.ranks;
  doc["sizes"] = c.sizes;
  doc["bound_us"] = c.bound_us;
  doc["contenders"] = nlohmann::ordered_json::array();
  for (const Contender& contender : c.contenders) {
    nlohmann::ordered_json results = nlohmann::ordered_json::array();
    for (std::size_t s = 0; s < contender.results.size(); ++s) {
      const support::SizeResult& p = contender.results[s];
      const auto speedup = vs_nccl(c, s, p);
      results.push_back({{"size_bytes", p.size_bytes},
                         {"time_us", p.time_us},
                         {"algbw_GBps", p.algbw_GBps},
                         {"busbw_GBps", p.busbw_GBps},
                         {"x_bound", p.x_bound()},
                         {"vs_nccl", speedup ? nlohmann::ordered_json(*speedup) : nullptr},
                         {"choice", contender.choices[s]}});
    }
    doc["contenders"].push_back({{"name", contender.name},
                                 {"synthesis_s", contender.synthesis_s},
                                 {"status", contender.status},
                                 {"results", results}});
  }
  return doc.dump(2) + "\n";
}

Comparison read_comparison_json(std::string_view text, const std::string& source) {
  const nlohmann::json doc = support::parse_json_text(text, source);
  const support::FieldReader r(doc, "", source);
  Comparison c;
  c.topology = r.string("topology");
  const std::string collective = r.string("collective");
  const auto parsed = support::collective_from_string(collective);
  if (!parsed) r.fail("collective", "unknown collective '" + collective + "'");
  c.collective = *parsed;
  const std::string model = r.string_or("model", "alpha-beta");
  const auto parsed_model = sim::model_from_string(model);
  if (!parsed_model) r.fail("model", "unknown model '" + model + "'");
  c.model = *parsed_model;
  c.ranks = r.int32("ranks", 1);
  const nlohmann::json& sizes = r.array("sizes");
  const nlohmann::json& bounds = r.array("bound_us");
  if (bounds.size() != sizes.size()) r.fail("bound_us", "needs one entry per size");
  for (std::size_t s = 0; s < sizes.size(); ++s) {
    const std::string at = "sizes[" + std::to_string(s) + "]";
    c.sizes.push_back(static_cast<std::uint64_t>(
        r.integer_value(sizes[s], at, 1, std::numeric_limits<std::int64_t>::max())));
    if (!bounds[s].is_number()) r.fail("bound_us[" + std::to_string(s) + "]", "must be a number");
    c.bound_us.push_back(bounds[s].get<double>());
  }
  const nlohmann::json& contenders = r.array("contenders");
  for (std::size_t k = 0; k < contenders.size(); ++k) {
    const support::FieldReader e(contenders[k], "contenders[" + std::to_string(k) + "]", source);
    Contender contender;
    contender.name = e.string("name");
    contender.synthesis_s = e.number_or("synthesis_s", 0);
    contender.status = e.string_or("status", "");
    const nlohmann::json& results = e.array("results");
    if (results.size() != c.sizes.size())
      e.fail(e.field("results"), "needs one entry per size (" + std::to_string(c.sizes.size()) +
                                     "), has " + std::to_string(results.size()));
    for (std::size_t s = 0; s < results.size(); ++s) {
      const support::FieldReader row(results[s], e.field("results") + "[" + std::to_string(s) + "]",
                                     source);
      const auto size = static_cast<std::uint64_t>(
          row.integer("size_bytes", 1, std::numeric_limits<std::int64_t>::max()));
      if (size != c.sizes[s])
        row.fail(row.field("size_bytes"), "is not sizes[" + std::to_string(s) + "]");
      support::SizeResult p =
          support::size_result(c.collective, c.ranks, size, row.number("time_us"));
      p.bound_us = c.bound_us[s];
      contender.results.push_back(p);
      contender.choices.push_back(row.string_or("choice", ""));
    }
    if (contender.name == "nccl")
      for (const support::SizeResult& p : contender.results) c.nccl_us.push_back(p.time_us);
    c.contenders.push_back(std::move(contender));
  }
  return c;
}

std::string comparison_csv(const Comparison& c) {
  auto field = [](const std::string& text) {  // RFC 4180: quoted where it needs to be
    if (text.find_first_of(",\"\n") == std::string::npos) return text;
    std::string quoted = "\"";
    for (char ch : text) quoted += ch == '"' ? std::string("\"\"") : std::string(1, ch);
    return quoted + "\"";
  };
  auto number = [](double value) {
    char text[32];
    std::snprintf(text, sizeof text, "%.6g", value);
    return std::string(text);
  };
  std::string csv =
      "contender,size_bytes,time_us,algbw_GBps,busbw_GBps,x_bound,vs_nccl,synthesis_s,choice\n";
  for (const Contender& contender : c.contenders)
    for (std::size_t s = 0; s < contender.results.size(); ++s) {
      const support::SizeResult& p = contender.results[s];
      const auto speedup = vs_nccl(c, s, p);
      csv += field(contender.name) + "," + std::to_string(p.size_bytes) + "," + number(p.time_us) +
             "," + number(p.algbw_GBps) + "," + number(p.busbw_GBps) + "," + number(p.x_bound()) +
             "," + (speedup ? number(*speedup) : "") + "," + number(contender.synthesis_s) + "," +
             field(contender.choices[s]) + "\n";
    }
  return csv;
}

}  // namespace optiflow::explore
