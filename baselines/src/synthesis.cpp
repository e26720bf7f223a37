#include "optiflow/baselines/synthesis.hpp"

#include "optiflow/support/strings.hpp"

namespace optiflow::baselines {

std::string SolverReport::summary() const {
  std::string text = solver + " " + status;
  if (gap) text += support::strprintf(", gap %.2f%%", 100.0 * *gap);
  return text + support::strprintf(", %.2f s", seconds);
}

}  // namespace optiflow::baselines
