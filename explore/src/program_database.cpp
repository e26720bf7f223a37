#include "program_database.hpp"

#include <algorithm>
#include <cmath>
#include <limits>

namespace optiflow::explore {

ProgramDatabase::ProgramDatabase(std::size_t size_count, std::size_t islands,
                                 std::size_t per_island)
    : size_count_(size_count),
      per_island_(per_island),
      islands_(std::max<std::size_t>(1, std::min(islands, size_count))) {}

// Island i cares about its contiguous band of the sizes: the mean log ratio to the bound.
double ProgramDatabase::fitness(const Entry& e, std::size_t island) const {
  if (e.time_us.empty()) return std::numeric_limits<double>::infinity();
  const std::size_t bands = islands_.size();
  const std::size_t first = island * size_count_ / bands, last = (island + 1) * size_count_ / bands;
  double sum = 0;
  for (std::size_t s = first; s < last; ++s) sum += std::log(e.parent.results[s].x_bound());
  return sum / static_cast<double>(std::max<std::size_t>(1, last - first));
}

void ProgramDatabase::insert(std::size_t island, const Entry& entry) {
  auto& pop = islands_[island];
  if (entry.time_us.empty()) return;
  for (const Entry& e : pop)
    if (e.parent.source == entry.parent.source) return;
  const double f = fitness(entry, island);
  auto at =
      std::find_if(pop.begin(), pop.end(), [&](const Entry& e) { return fitness(e, island) > f; });
  pop.insert(at, entry);
  if (pop.size() > per_island_) pop.pop_back();
}

void ProgramDatabase::add(const Entry& entry, int island) {
  if (island < 0) {
    for (std::size_t i = 0; i < islands_.size(); ++i) insert(i, entry);
  } else {
    insert(static_cast<std::size_t>(island) % islands_.size(), entry);
  }
}

void ProgramDatabase::migrate() {
  std::vector<Entry> best;
  for (const auto& pop : islands_)
    if (!pop.empty()) best.push_back(pop.front());
  for (std::size_t i = 0; i < best.size(); ++i) insert((i + 1) % islands_.size(), best[i]);
}

bool ProgramDatabase::empty() const {
  return std::all_of(islands_.begin(), islands_.end(), [](const auto& p) { return p.empty(); });
}

std::vector<const Entry*> ProgramDatabase::parents(std::size_t island, std::mt19937_64& rng) const {
  const auto& pop = islands_[island % islands_.size()];
  auto tournament = [&](const std::vector<Entry>& from) -> const Entry* {
    if (from.empty()) return nullptr;
    const std::size_t a = rng() % from.size(), b = rng() % from.size();
    return &from[std::min(a, b)];  // sorted by fitness: the lower index wins
  };
  std::vector<const Entry*> chosen;
  if (const Entry* first = tournament(pop)) chosen.push_back(first);
  if (!chosen.empty() && rng() % 5 == 0) {  // crossover with another island's program
    const Entry* second = tournament(islands_[rng() % islands_.size()]);
    if (second && second->parent.source != chosen.front()->parent.source) chosen.push_back(second);
  }
  return chosen;
}

}  // namespace optiflow::explore
