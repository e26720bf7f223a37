#include "patterns.hpp"

namespace optiflow::compiler {
namespace {

int ceil_log2(std::int32_t m) {
  int levels = 0;
  while ((std::int64_t{1} << levels) < m) ++levels;
  return levels;
}

// Trees below are built on relative indices x (the root is x = 0); `to_position` maps them back.
template <typename ToPosition>
void add(PatternTree& tree, std::int32_t from, std::int32_t to, std::int32_t round,
         ToPosition to_position) {
  tree.edges.push_back(TreeEdge{to_position(from), to_position(to), round});
}

PatternTree heap_tree(std::int32_t m, int arity, auto to_position) {
  PatternTree tree;
  std::vector<std::int32_t> depth(static_cast<std::size_t>(m), 0);
  for (std::int32_t x = 0; x < m; ++x)
    for (int c = 1; c <= arity; ++c) {
      const std::int64_t child = std::int64_t{x} * arity + c;
      if (child >= m) break;
      depth[static_cast<std::size_t>(child)] = depth[static_cast<std::size_t>(x)] + 1;
      add(tree, x, static_cast<std::int32_t>(child), depth[static_cast<std::size_t>(x)],
          to_position);
    }
  return tree;
}

}  // namespace

PatternTree pattern_tree(dsl::Pattern pattern, int arity, std::int32_t m, std::int32_t root) {
  auto cyclic = [m, root](std::int32_t x) { return (x + root) % m; };
  PatternTree tree;
  switch (pattern) {
    case dsl::Pattern::ring:
      for (std::int32_t x = 0; x + 1 < m; ++x) add(tree, x, x + 1, x, cyclic);
      return tree;
    case dsl::Pattern::direct:
      for (std::int32_t x = 1; x < m; ++x) add(tree, 0, x, 0, cyclic);
      return tree;
    case dsl::Pattern::chain: {
      // Both ways along the fixed order, no wrap-around.
      auto absolute = [](std::int32_t p) { return p; };
      for (std::int32_t p = root; p + 1 < m; ++p) add(tree, p, p + 1, p - root, absolute);
      for (std::int32_t p = root; p > 0; --p) add(tree, p, p - 1, root - p, absolute);
      return tree;
    }
    case dsl::Pattern::binomial: {
      // Farthest half first (MPICH's binomial broadcast; NCCL's PAT uses the same trees).
      const int levels = ceil_log2(m);
      for (int k = 0; k < levels; ++k) {
        const std::int32_t distance = std::int32_t{1} << (levels - 1 - k);
        for (std::int32_t x = 0; x < m; x += 2 * distance)
          if (x + distance < m) add(tree, x, x + distance, k, cyclic);
      }
      return tree;
    }
    case dsl::Pattern::bruck: {
      // Round k: everything gathered so far moves 2^k positions on.
      const int levels = ceil_log2(m);
      for (int k = 0; k < levels; ++k) {
        const std::int32_t distance = std::int32_t{1} << k;
        for (std::int32_t x = 0; x < distance && x + distance < m; ++x)
          add(tree, x, x + distance, k, cyclic);
      }
      return tree;
    }
    case dsl::Pattern::rd: {
      if (m & (m - 1)) {
        tree.error =
            "recursive doubling needs a group whose size is a power of two; this group has " +
            std::to_string(m) + " members (use bruck or binomial instead)";
        return tree;
      }
      auto xor_root = [root](std::int32_t x) { return x ^ root; };
      for (int k = 0; (std::int32_t{1} << k) < m; ++k)
        for (std::int32_t x = 0; x < (std::int32_t{1} << k); ++x)
          add(tree, x, x | (std::int32_t{1} << k), k, xor_root);
      return tree;
    }
    case dsl::Pattern::binary:
      return heap_tree(m, 2, cyclic);
    case dsl::Pattern::kary:
      return heap_tree(m, arity, cyclic);
    case dsl::Pattern::dbtree:
    case dsl::Pattern::scatter:
    case dsl::Pattern::bfs:
    case dsl::Pattern::pack:
      break;
  }
  tree.error = "internal: pattern has no fixed tree";
  return tree;
}

PatternTree mirrored_binary_tree(std::int32_t m, std::int32_t root) {
  return heap_tree(m, 2, [m, root](std::int32_t x) { return ((root - x) % m + m) % m; });
}

}  // namespace optiflow::compiler
