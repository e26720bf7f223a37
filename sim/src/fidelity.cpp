#include "optiflow/sim/fidelity.hpp"

#include <algorithm>
#include <cmath>
#include <map>
#include <tuple>

namespace optiflow::sim {
namespace {

using GroupKey = std::tuple<support::Collective, int, std::uint64_t>;

double kendall_tau(std::span<const FidelityPoint* const> group) {
  long agree = 0, disagree = 0, pairs = 0;
  for (std::size_t i = 0; i < group.size(); ++i)
    for (std::size_t j = i + 1; j < group.size(); ++j) {
      const double order = (group[i]->simulated_us - group[j]->simulated_us) *
                           (group[i]->measured_us - group[j]->measured_us);
      agree += order > 0;
      disagree += order < 0;
      ++pairs;
    }
  return pairs == 0 ? 0 : static_cast<double>(agree - disagree) / static_cast<double>(pairs);
}

GroupFidelity group_fidelity(const GroupKey& key, std::span<const FidelityPoint* const> group) {
  GroupFidelity g;
  std::tie(g.collective, g.ranks, g.size_bytes) = key;
  g.schedules = group.size();
  g.kendall_tau = kendall_tau(group);
  auto by = [](double FidelityPoint::*time) {
    return [time](const FidelityPoint* a, const FidelityPoint* b) { return a->*time < b->*time; };
  };
  const FidelityPoint* pick = *std::ranges::min_element(group, by(&FidelityPoint::simulated_us));
  const FidelityPoint* best = *std::ranges::min_element(group, by(&FidelityPoint::measured_us));
  g.simulator_pick = pick->schedule;
  g.measured_best = best->schedule;
  g.regret = pick->measured_us / best->measured_us;
  return g;
}

}  // namespace

double median(std::vector<double> values) {
  if (values.empty()) return 0;
  std::ranges::sort(values);
  const std::size_t mid = values.size() / 2;
  return values.size() % 2 ? values[mid] : (values[mid - 1] + values[mid]) / 2;
}

FidelityReport fidelity(std::span<const FidelityPoint> points) {
  FidelityReport report;
  std::map<GroupKey, std::vector<const FidelityPoint*>> groups;
  std::vector<double> errors;
  for (const FidelityPoint& p : points) {
    auto& group = groups[{p.collective, p.ranks, p.size_bytes}];
    if (std::ranges::any_of(group, [&](const auto* q) { return q->schedule == p.schedule; }))
      continue;
    group.push_back(&p);
    errors.push_back(std::abs(p.error()));
  }
  report.points = errors.size();
  report.median_error = median(errors);
  report.worst_error = errors.empty() ? 0 : std::ranges::max(errors);
  std::vector<double> taus, regrets;
  for (const auto& [key, group] : groups) {
    if (group.size() < 2) continue;
    const GroupFidelity& g = report.groups.emplace_back(group_fidelity(key, group));
    taus.push_back(g.kendall_tau);
    regrets.push_back(g.regret);
    report.picks_best += g.simulator_pick == g.measured_best;
    report.picks_within_tol += g.regret <= 1 + kPickTolerance;
  }
  report.median_tau = median(taus);
  report.median_regret = regrets.empty() ? 1 : median(regrets);
  report.worst_regret = regrets.empty() ? 1 : std::ranges::max(regrets);
  return report;
}

}  // namespace optiflow::sim
