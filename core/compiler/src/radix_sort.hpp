// A stable sort of (key, index) pairs for the passes that order millions of transfers: a
// least-significant-digit radix sort makes a few sequential passes over a compact array where
// a comparison sort would make n log n comparisons all over it.
#pragma once

#include <algorithm>
#include <bit>
#include <cstdint>
#include <utility>
#include <vector>

namespace optiflow::compiler::passes {

struct KeyedIndex {
  std::uint64_t key;
  std::int32_t index;
};

/// Sorts by key; items with equal keys keep their order, so items made in index order come out
/// ordered by (key, index).
inline void radix_sort(std::vector<KeyedIndex>& items) {
  constexpr int kDigitBits = 11;  // 2,048 buckets: the write streams stay in cache
  constexpr std::uint64_t kMask = (std::uint64_t{1} << kDigitBits) - 1;
  std::vector<KeyedIndex> sorted(items.size());
  std::vector<std::size_t> start(std::size_t{1} << kDigitBits);
  for (int shift = 0; shift < 64; shift += kDigitBits) {
    std::fill(start.begin(), start.end(), 0);
    for (const KeyedIndex& item : items) ++start[(item.key >> shift) & kMask];
    if (std::find(start.begin(), start.end(), items.size()) != start.end()) continue;
    std::size_t total = 0;
    for (std::size_t& bucket : start) total += std::exchange(bucket, total);
    for (const KeyedIndex& item : items) sorted[start[(item.key >> shift) & kMask]++] = item;
    items.swap(sorted);
  }
}

/// The bits of a non-negative double, which order as the doubles do.
inline std::uint64_t order_bits(double non_negative) {
  return std::bit_cast<std::uint64_t>(non_negative);
}

}  // namespace optiflow::compiler::passes
