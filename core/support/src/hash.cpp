#include "optiflow/support/hash.hpp"

#include <array>
#include <cstdio>

namespace optiflow::support {

std::string ContentHasher::hex() const {
  std::array<char, 17> text{};
  std::snprintf(text.data(), text.size(), "%016llx", static_cast<unsigned long long>(state_));
  return text.data();
}

std::string content_hash(std::string_view bytes) {
  ContentHasher hasher;
  hasher.update(bytes);
  return hasher.hex();
}

}  // namespace optiflow::support
