// printf-style formatting into a std::string (GCC 12 has no <format>).
#pragma once

#include <string>

namespace optiflow::support {

[[gnu::format(printf, 1, 2)]] std::string strprintf(const char* fmt, ...);

}  // namespace optiflow::support
