#include "format.hpp"

#include <cstdarg>
#include <cstdio>
#include <vector>

namespace optiflow::cli {

std::string strprintf(const char* fmt, ...) {
  va_list args;
  va_start(args, fmt);
  va_list copy;
  va_copy(copy, args);
  const int length = std::vsnprintf(nullptr, 0, fmt, copy);
  va_end(copy);
  std::vector<char> buffer(static_cast<std::size_t>(length) + 1);
  std::vsnprintf(buffer.data(), buffer.size(), fmt, args);
  va_end(args);
  return std::string(buffer.data(), static_cast<std::size_t>(length));
}

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

}  // namespace optiflow::cli
