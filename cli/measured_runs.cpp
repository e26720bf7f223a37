#include "measured_runs.hpp"

#include <fnmatch.h>

#include <algorithm>
#include <map>
#include <set>

#include "format.hpp"
#include "optiflow/db/store.hpp"
#include "optiflow/schedule/schedule_io.hpp"
#include "optiflow/support/error.hpp"

namespace optiflow::cli {
namespace {

bool matches_any(const std::vector<std::string>& globs, const std::string& name) {
  return std::ranges::any_of(
      globs, [&](const std::string& glob) { return fnmatch(glob.c_str(), name.c_str(), 0) == 0; });
}

bool wanted(const MeasuredFilter& filter, const std::string& name) {
  return (filter.only.empty() || matches_any(filter.only, name)) &&
         !matches_any(filter.exclude, name);
}

struct Entry {
  sim::MeasuredSchedule measured;
  std::map<std::uint64_t, double> best_us;
};

// Names shared by schedules of one collective but different content get the hash's first
// characters.
void disambiguate(std::vector<Entry*>& entries, const std::vector<std::string>& hashes) {
  auto key = [&](std::size_t i) {
    const schedule::Schedule& s = entries[i]->measured.schedule;
    return std::pair{s.collective, s.name};
  };
  std::map<std::pair<support::Collective, std::string>, std::set<std::string>> hashes_of;
  for (std::size_t i = 0; i < entries.size(); ++i) hashes_of[key(i)].insert(hashes[i]);
  for (std::size_t i = 0; i < entries.size(); ++i)
    if (hashes_of[key(i)].size() > 1)
      entries[i]->measured.schedule.name += "#" + hashes[i].substr(0, 6);
}

}  // namespace

std::vector<sim::MeasuredSchedule> read_measured(const std::vector<std::string>& databases,
                                                 const MeasuredFilter& filter) {
  std::map<std::string, Entry> by_hash;  // by schedule hash
  std::vector<std::string> order;        // hashes, first seen first
  std::set<std::string> backends;
  for (const std::string& path : databases) {
    const db::Store store = db::Store::open_read_only(path);
    for (const db::Store::HwMeasurement& row : store.hw_measurements()) {
      if (!filter.backend.empty() && row.backend != filter.backend) continue;
      auto [it, added] = by_hash.try_emplace(row.schedule_hash);
      if (added) {
        it->second.measured.schedule = schedule::parse_schedule_json(
            row.schedule_json, path + ": schedules." + row.schedule_hash);
        order.push_back(row.schedule_hash);
      }
      if (!wanted(filter, it->second.measured.schedule.name)) continue;
      backends.insert(row.backend);
      auto [best, first] = it->second.best_us.try_emplace(row.perf.size_bytes, row.perf.time_us);
      if (!first) best->second = std::min(best->second, row.perf.time_us);
    }
  }
  if (backends.size() > 1)
    throw support::InputError(
        support::SourceLocation{databases.front(), 0, 0, "hw_results.backend"},
        "the measurements come from more than one backend (" + *backends.begin() + ", " +
            *std::next(backends.begin()) + "): choose one");
  std::vector<Entry*> kept;
  std::vector<std::string> hashes;
  for (const std::string& hash : order) {
    Entry& entry = by_hash[hash];
    if (entry.best_us.empty()) continue;
    for (const auto& [size, time] : entry.best_us) entry.measured.times_us.emplace_back(size, time);
    kept.push_back(&entry);
    hashes.push_back(hash);
  }
  disambiguate(kept, hashes);  // after filtering: globs match the names as stored
  std::vector<sim::MeasuredSchedule> result;
  for (Entry* entry : kept) result.push_back(std::move(entry->measured));
  return result;
}

std::string fidelity_summary(const sim::FidelityReport& r) {
  return strprintf(
      "median |error| %.1f%%, worst %.1f%%; %zu groups: median Kendall tau %.2f; the "
      "simulator's pick is the measured best in %zu, within %.0f%% of it in %zu; regret median "
      "%.2fx, worst %.2fx",
      100 * r.median_error, 100 * r.worst_error, r.groups.size(), r.median_tau, r.picks_best,
      100 * sim::kPickTolerance, r.picks_within_tol, r.median_regret, r.worst_regret);
}

}  // namespace optiflow::cli
