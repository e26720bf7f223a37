#include "optiflow/support/sizes.hpp"

#include <algorithm>
#include <array>
#include <cctype>
#include <charconv>
#include <limits>

#include "optiflow/support/error.hpp"

namespace optiflow::support {
namespace {

constexpr std::array<std::pair<char, int>, 4> kSuffixShift{
    {{'K', 10}, {'M', 20}, {'G', 30}, {'T', 40}}};
constexpr std::size_t kMaxRangeEntries = 64;

[[noreturn]] void fail(const std::string& what, const std::string& message) {
  throw OptionError(what, message);
}

}  // namespace

std::uint64_t parse_size(std::string_view text, const std::string& what) {
  const std::string original(text);
  std::uint64_t value = 0;
  auto [end, ec] = std::from_chars(text.data(), text.data() + text.size(), value);
  if (ec != std::errc{} || end == text.data())
    fail(what, "'" + original + "' is not a size (examples: 4096, 64K, 1M, 1G)");
  std::string suffix(end, text.data() + text.size());
  for (char& c : suffix) c = static_cast<char>(std::toupper(static_cast<unsigned char>(c)));
  int shift = 0;
  if (!suffix.empty() && suffix != "B") {
    auto it = std::find_if(kSuffixShift.begin(), kSuffixShift.end(),
                           [&](const auto& entry) { return entry.first == suffix[0]; });
    const std::string rest = suffix.substr(1);
    if (it == kSuffixShift.end() || !(rest.empty() || rest == "B" || rest == "IB"))
      fail(what, "'" + original + "' has an unknown unit (use K, M, G or T, powers of two)");
    shift = it->second;
  }
  if (value > (std::numeric_limits<std::uint64_t>::max() >> shift))
    fail(what, "'" + original + "' is too large");
  value <<= shift;
  if (value == 0) fail(what, "'" + original + "' must be at least 1 byte");
  return value;
}

std::vector<std::uint64_t> parse_sizes(std::string_view spec, const std::string& what) {
  std::vector<std::uint64_t> sizes;
  if (spec.empty()) fail(what, "no size given");
  for (bool more = true; more;) {
    const auto comma = spec.find(',');
    const std::string_view item = spec.substr(0, comma);
    more = comma != std::string_view::npos;
    if (more) spec = spec.substr(comma + 1);
    if (item.empty()) fail(what, "empty entry in the list (examples: 1M, 1K:1G, 4K,64M)");
    const auto colon = item.find(':');
    if (colon == std::string_view::npos) {
      sizes.push_back(parse_size(item, what));
      continue;
    }
    const std::uint64_t low = parse_size(item.substr(0, colon), what);
    const std::uint64_t high = parse_size(item.substr(colon + 1), what);
    if (low > high) fail(what, "range '" + std::string(item) + "' runs backwards");
    for (std::uint64_t s = low; s <= high; s *= 2) {
      sizes.push_back(s);
      if (sizes.size() > kMaxRangeEntries) fail(what, "too many sizes (more than 64)");
      if (s > high / 2) break;
    }
  }
  std::sort(sizes.begin(), sizes.end());
  sizes.erase(std::unique(sizes.begin(), sizes.end()), sizes.end());
  return sizes;
}

std::string format_size(std::uint64_t bytes) {
  for (auto it = kSuffixShift.rbegin(); it != kSuffixShift.rend(); ++it) {
    const std::uint64_t unit = std::uint64_t{1} << it->second;
    if (bytes >= unit && bytes % unit == 0) return std::to_string(bytes / unit) + it->first;
  }
  return std::to_string(bytes);
}

}  // namespace optiflow::support
