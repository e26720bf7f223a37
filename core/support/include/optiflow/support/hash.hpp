// Content hashes: 64-bit FNV-1a as 16 hex digits. Fast and stable across platforms; what the
// store keys programs, topologies and schedules by (a cache key, not a security measure).
#pragma once

#include <cstdint>
#include <string>
#include <string_view>

namespace optiflow::support {

/// Hashes bytes as they come, so that a large text need not be built to be hashed.
class ContentHasher {
 public:
  void update(std::string_view bytes) {
    for (unsigned char byte : bytes) {
      state_ ^= byte;
      state_ *= 1099511628211ULL;  // FNV prime
    }
  }
  std::string hex() const;

 private:
  std::uint64_t state_ = 14695981039346656037ULL;  // FNV-1a 64-bit offset basis
};

std::string content_hash(std::string_view bytes);

}  // namespace optiflow::support
