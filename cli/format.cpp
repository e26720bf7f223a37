#include "format.hpp"

#include <iostream>
#include <vector>

#include "optiflow/db/store.hpp"

namespace optiflow::cli {

std::string compact_number(double value) {
  std::string text = strprintf("%.3f", value);
  while (text.back() == '0') text.pop_back();
  if (text.back() == '.') text.pop_back();
  return text;
}

nlohmann::json simulation_row(const sim::SimResult& result, const topology::LowerBound& bound) {
  const double bound_us = bound.at(result.size_bytes).time_us;
  return {{"size_bytes", result.size_bytes},
          {"time_us", result.time_us},
          {"algbw_GBps", result.algbw_GBps},
          {"busbw_GBps", result.busbw_GBps},
          {"protocol", topology::to_string(result.protocol)},
          {"bound_us", bound_us},
          {"bound_ratio", result.time_us / bound_us}};
}

void print_simulation_json(const std::string& topology, support::Collective collective,
                           const std::string& model, const std::string& schedule,
                           nlohmann::json rows, nlohmann::json extra) {
  nlohmann::json doc{{"topology", topology},
                     {"collective", support::to_string(collective)},
                     {"model", model},
                     {"schedule", schedule},
                     {"results", std::move(rows)}};
  doc.update(extra);
  std::cout << doc.dump(2, ' ', false, nlohmann::json::error_handler_t::replace) << "\n";
}

std::string model_call_totals_line(const db::ModelCallTotals& t) {
  return strprintf(
      "model calls: %lld (%lld from the replay cache, %lld failed), %lld prompt + %lld "
      "completion tokens, cost %.4f",
      static_cast<long long>(t.calls), static_cast<long long>(t.cached),
      static_cast<long long>(t.failed), static_cast<long long>(t.prompt_tokens),
      static_cast<long long>(t.completion_tokens), t.cost);
}

}  // namespace optiflow::cli
