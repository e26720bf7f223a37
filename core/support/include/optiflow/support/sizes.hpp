// Buffer sizes on the command line: "64M", "1K:1G" (doubling ranges), comma lists.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

namespace optiflow::support {

/// The sizes a command or a view runs when given none: 1 KiB to 1 GiB, doubling (21 sizes).
inline constexpr char kDefaultSizes[] = "1K:1G";

/// Parses one size: an integer number of bytes with an optional K, M, G or T suffix (powers of
/// two; "KiB"/"KB"/"B" spellings accepted). Throws OptionError naming the option `what`.
std::uint64_t parse_size(std::string_view text, const std::string& what = "size");

/// Parses a list of sizes or ranges separated by commas; "A:B" doubles from A up to B.
/// The result is sorted and free of duplicates.
std::vector<std::uint64_t> parse_sizes(std::string_view spec, const std::string& what = "sizes");

/// Shortest exact spelling: 1024 -> "1K", 3 << 20 -> "3M", 1000 -> "1000".
std::string format_size(std::uint64_t bytes);

}  // namespace optiflow::support
