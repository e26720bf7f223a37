// The population: islands, each favouring a band of buffer sizes, each keeping its best
// programs (as in FunSearch/OpenEvolve), plus the best program per size overall.
#pragma once

#include <cstdint>
#include <random>
#include <string>
#include <vector>

#include "optiflow/propose/proposer.hpp"

namespace optiflow::explore {

struct Entry {
  std::int64_t seq = 0;
  std::int64_t program_id = 0;
  propose::Parent parent;       ///< source and results, as proposers see them
  std::vector<double> time_us;  ///< per size; empty when it failed
};

class ProgramDatabase {
 public:
  ProgramDatabase(std::size_t size_count, std::size_t islands, std::size_t per_island);

  std::size_t island_count() const { return islands_.size(); }
  /// Adds an evaluated candidate to one island (or, with island < 0, to all).
  void add(const Entry& entry, int island);
  /// Copies each island's best into the next one.
  void migrate();
  /// One or two parents for a new proposal on `island` (tournaments of two).
  std::vector<const Entry*> parents(std::size_t island, std::mt19937_64& rng) const;
  bool empty() const;

 private:
  double fitness(const Entry& e, std::size_t island) const;  ///< lower is better
  void insert(std::size_t island, const Entry& entry);

  std::size_t size_count_;
  std::size_t per_island_;
  std::vector<std::vector<Entry>> islands_;  ///< each sorted by fitness
};

}  // namespace optiflow::explore
