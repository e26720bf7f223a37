#include <set>

#include "optiflow/gui/views.hpp"
#include "optiflow/topology/generators.hpp"

namespace optiflow::gui {

std::vector<std::string> known_topologies(const std::string& db_path) {
  std::set<std::string> names;
  try {
    const db::Store store = db::Store::open(db_path);
    for (const db::RunInfo& run : store.runs()) names.insert(run.topology_name);
    for (const db::ComparisonRecord& c : store.comparisons()) names.insert(c.topology_name);
  } catch (const db::DbError&) {
    // An unreadable database still leaves the built-in topologies to look at.
  }
  std::vector<std::string> list(names.begin(), names.end());
  for (const topology::BuiltinFamily& family : topology::builtin_families())
    if (!names.contains(family.example)) list.push_back(family.example);
  return list;
}

}  // namespace optiflow::gui
