// Measurements are ranked by simulated time against the bound, over all sizes.
#include "hw_measurements.hpp"

#include <algorithm>
#include <cmath>
#include <set>

namespace optiflow::explore {

HwMeasurements::HwMeasurements(const ExploreOptions& options) : options_(options) {}

void HwMeasurements::measure(const std::vector<Candidate>& batch) {
  if (!active()) return;
  for (std::size_t i : best_unmeasured(batch)) measure_one(batch[i]);
}

const std::vector<double>* HwMeasurements::times(const Candidate& c) const {
  if (!c.ok()) return nullptr;
  const auto it = measured_.find(c.compiled.schedule_hash);
  return it != measured_.end() && it->second ? &*it->second : nullptr;
}

// The batch's hw_topk best distinct schedules not measured before, best first.
std::vector<std::size_t> HwMeasurements::best_unmeasured(
    const std::vector<Candidate>& batch) const {
  std::vector<std::pair<double, std::size_t>> ranked;
  std::set<std::string> hashes;
  for (std::size_t i = 0; i < batch.size(); ++i) {
    const Candidate& c = batch[i];
    // A reused candidate's schedule was a candidate's before (and is no longer kept).
    if (!c.ok() || c.reused || measured_.contains(c.compiled.schedule_hash) ||
        !hashes.insert(c.compiled.schedule_hash).second)
      continue;
    ranked.emplace_back(mean_log_ratio(c.simulated), i);
  }
  std::stable_sort(ranked.begin(), ranked.end(),
                   [](const auto& a, const auto& b) { return a.first < b.first; });
  ranked.resize(std::min(ranked.size(), static_cast<std::size_t>(options_.hw_topk)));
  std::vector<std::size_t> best;
  for (const auto& [score, i] : ranked) best.push_back(i);
  return best;
}

// Mean over the sizes of log(simulated time / bound).
double HwMeasurements::mean_log_ratio(const Simulated& simulated) const {
  double sum = 0;
  for (const support::SizeResult& r : simulated.results) sum += std::log(r.x_bound());
  return sum / static_cast<double>(simulated.results.size());
}

void HwMeasurements::measure_one(const Candidate& c) {
  std::optional<std::vector<double>> times;
  std::string why = "no result";
  try {
    times = options_.measure(c.compiled.schedule, options_.topology, options_.sizes);
  } catch (const std::exception& e) {
    why = e.what();
  }
  const bool valid = times && times->size() == options_.sizes.size() &&
                     std::all_of(times->begin(), times->end(), [](double t) { return t > 0; });
  if (!valid) {
    if (times) why = "a time missing or not positive";
    warn("candidate " + std::to_string(c.seq) + " (schedule " + c.compiled.schedule_hash +
         ") could not be measured on " + options_.hw_backend + ": " + why +
         "; it keeps its simulated result");
    measured_[c.compiled.schedule_hash] = std::nullopt;
    ++failed_count_;
    return;
  }
  for (std::size_t s = 0; s < times->size() && s < c.simulated.results.size(); ++s)
    points_.push_back(sim::FidelityPoint{options_.collective, c.compiled.schedule.ranks,
                                         options_.sizes[s], "candidate " + std::to_string(c.seq),
                                         c.simulated.results[s].time_us, (*times)[s]});
  measured_[c.compiled.schedule_hash] = std::move(times);
  ++measured_count_;
}

void HwMeasurements::warn(const std::string& message) const {
  options_.warning(message);
}

}  // namespace optiflow::explore
