// The coalesce pass: transfers of contiguous chunks that one step sends in one round between
// the same ranks become one message.
#include <algorithm>
#include <array>
#include <functional>
#include <numeric>
#include <queue>

#include "pass_table.hpp"
#include "radix_sort.hpp"

namespace optiflow::compiler::passes {
namespace {

// Transfers that may become one message: same ranks, step, round, slice, kind and route.
struct MergeKey {
  std::array<std::int32_t, 8> group;
  std::int64_t first_chunk;
  Index index;
  auto operator<=>(const MergeKey&) const = default;
};

MergeKey merge_key(const Transfer& x, Index index) {
  return MergeKey{
      {x.src, x.dst, x.stage, x.round, x.slice, x.reduce ? 1 : 0, x.explicit_route, x.avoid_set},
      x.first_chunk,
      index};
}

// A hash of the merge group, so that candidates are found by sorting 16-byte pairs: most
// transfers share their group with no other.
std::uint64_t group_hash(const MergeKey& key) {
  std::uint64_t h = 0x9e3779b97f4a7c15u;
  for (std::int32_t field : key.group) {  // splitmix64's finaliser over each field
    h ^= static_cast<std::uint32_t>(field);
    h = (h ^ (h >> 30)) * 0xbf58476d1ce4e5b9u;
    h = (h ^ (h >> 27)) * 0x94d049bb133111ebu;
    h ^= h >> 31;
  }
  return h;
}

// Merges each transfer of `run` (sorted) that continues its group's previous message without
// a gap into it; returns whether any did.
bool merge_contiguous(Plan& plan, const std::vector<MergeKey>& run,
                      std::vector<Index>& merged_into) {
  bool merged = false;
  for (std::size_t i = 1; i < run.size(); ++i) {
    if (run[i - 1].group != run[i].group) continue;
    const Index head_index = merged_into[at(run[i - 1].index)];
    Transfer& head = plan.transfers[at(head_index)];
    const Transfer& tail = plan.transfers[at(run[i].index)];
    if (head.first_chunk + head.chunk_count != tail.first_chunk) continue;
    head.chunk_count += tail.chunk_count;
    head.data.end = tail.data.end;
    head.piece = std::min(head.piece, tail.piece);
    merged_into[at(run[i].index)] = head_index;
    merged = true;
  }
  return merged;
}

// Orders `survivors` so that dependencies come first again (lowest index first among the
// ready), mapping each dependency through `merged_into`.
void sort_survivors(Plan& plan, const std::vector<Index>& merged_into,
                    const std::vector<std::vector<Index>>& members) {
  const std::size_t n = plan.transfers.size();
  std::vector<std::vector<Index>> deps(n);
  std::vector<std::uint32_t> user_counts(n, 0);
  for (std::size_t s = 0; s < n; ++s) {
    if (merged_into[s] != static_cast<Index>(s)) continue;
    auto& d = deps[s];
    for (Index m : members[s])
      for (Index x : plan.deps[at(m)]) d.push_back(merged_into[at(x)]);
    std::sort(d.begin(), d.end());
    d.erase(std::unique(d.begin(), d.end()), d.end());
    for (Index x : d) ++user_counts[at(x)];
  }
  const IndexLists users = gather_lists(user_counts, [&](auto place) {
    for (std::size_t s = 0; s < n; ++s)
      for (Index x : deps[s]) place(at(x), static_cast<Index>(s));
  });
  std::vector<std::size_t> remaining(n, 0);
  std::priority_queue<Index, std::vector<Index>, std::greater<>> ready;
  std::size_t survivors = 0;
  for (std::size_t s = 0; s < n; ++s) {
    if (merged_into[s] != static_cast<Index>(s)) continue;
    ++survivors;
    remaining[s] = deps[s].size();
    if (remaining[s] == 0) ready.push(static_cast<Index>(s));
  }
  Plan sorted = empty_like(plan);
  std::vector<Index> new_index(n, -1), mapped;
  while (!ready.empty()) {
    const Index t = ready.top();
    ready.pop();
    new_index[at(t)] = static_cast<Index>(sorted.transfers.size());
    mapped.clear();
    for (Index d : deps[at(t)]) mapped.push_back(new_index[at(d)]);
    std::sort(mapped.begin(), mapped.end());
    sorted.add(plan.transfers[at(t)], mapped);
    for (Index u : users[at(t)])
      if (--remaining[at(u)] == 0) ready.push(u);
  }
  // Merging only joins transfers of one round, which never wait on each other; if that ever
  // failed, a cycle would leave transfers unsorted.
  if (sorted.transfers.size() != survivors)
    throw InternalError("coalesce: merged transfers form a cycle");
  plan = std::move(sorted);
}

}  // namespace

void coalesce(Plan& plan) {
  const auto n = static_cast<Index>(plan.transfers.size());
  std::vector<KeyedIndex> hashed(at(n));
  for (Index t = 0; t < n; ++t)
    hashed[at(t)] = {group_hash(merge_key(plan.transfers[at(t)], t)), t};
  radix_sort(hashed);
  std::vector<Index> merged_into(at(n));
  std::iota(merged_into.begin(), merged_into.end(), 0);
  bool merged = false;
  std::vector<MergeKey> run;
  for (std::size_t i = 0, j = 0; i < hashed.size(); i = j) {
    for (j = i + 1; j < hashed.size() && hashed[j].key == hashed[i].key;) ++j;
    if (j - i == 1) continue;
    run.clear();
    for (std::size_t k = i; k < j; ++k)
      run.push_back(merge_key(plan.transfers[at(hashed[k].index)], hashed[k].index));
    std::sort(run.begin(), run.end());
    merged = merge_contiguous(plan, run, merged_into) || merged;
  }
  if (!merged) return;
  hashed = {};
  std::vector<std::vector<Index>> members(at(n));
  for (Index t = 0; t < n; ++t) members[at(merged_into[at(t)])].push_back(t);
  sort_survivors(plan, merged_into, members);
}

void coalesce_pass(CompileState& state) {
  coalesce(state.plan);
}

}  // namespace optiflow::compiler::passes
