// The compiler's working form between the DSL and the schedule IR: a list of transfers of
// exact fractions of the buffer between ranks, with the dependencies that carry data.
#pragma once

#include <cstdint>
#include <optional>
#include <span>
#include <vector>

#include "optiflow/compiler/limits.hpp"
#include "optiflow/support/rational.hpp"
#include "optiflow/topology/protocol.hpp"
#include "optiflow/topology/topology.hpp"

namespace optiflow::compiler {

/// [begin, end) as fractions of the collective's buffer (All-Gather: the output).
struct Interval {
  support::Rational begin;
  support::Rational end;
  bool operator==(const Interval&) const = default;
};

/// One list of transfer indices per transfer, stored back to back: a plan of millions of
/// transfers would otherwise spend more on one vector per transfer than on the transfers.
class IndexLists {
 public:
  IndexLists() = default;
  /// List k is items[begin[k] .. begin[k + 1]); begin starts at 0 and ends at items.size().
  IndexLists(std::vector<std::uint32_t> begin, std::vector<std::int32_t> items)
      : begin_(std::move(begin)), items_(std::move(items)) {
    if (begin_.empty() || begin_.front() != 0 || begin_.back() != items_.size())
      throw InternalError("index lists whose bounds do not cover their items");
  }

  std::size_t size() const { return begin_.size() - 1; }
  std::size_t total() const { return items_.size(); }
  std::span<const std::int32_t> operator[](std::size_t list) const {
    return {items_.data() + begin_[list], items_.data() + begin_[list + 1]};
  }
  /// Appends the next list.
  void push_back(std::span<const std::int32_t> list) {
    items_.insert(items_.end(), list.begin(), list.end());
    close_list();
  }
  /// Appends the next list one item at a time: add() its items, then close_list().
  void add(std::int32_t item) { items_.push_back(item); }
  void close_list() {
    if (items_.size() > kMaxTotal) throw InternalError("more than 2^32 dependencies in a plan");
    begin_.push_back(static_cast<std::uint32_t>(items_.size()));
  }
  /// Starts loading where list `list` is, for passes that visit lists out of order.
  void prefetch(std::size_t list) const { __builtin_prefetch(&begin_[list]); }
  void reserve(std::size_t lists, std::size_t total) {
    begin_.reserve(lists + 1);
    items_.reserve(total);
  }
  bool operator==(const IndexLists&) const = default;

 private:
  static constexpr std::size_t kMaxTotal = UINT32_MAX;
  std::vector<std::uint32_t> begin_{0};
  std::vector<std::int32_t> items_;
};

/// Moving one interval from one rank to another. Until the pass `assign_chunks`, `data` is
/// exact fractions; after it, `first_chunk`/`chunk_count` say the same in chunks. What the
/// passes after evaluation read comes first, in one cache line: they visit millions of
/// transfers out of order.
struct Transfer {
  std::int32_t src = 0;
  std::int32_t dst = 0;
  std::int64_t first_chunk = 0;
  std::int64_t chunk_count = 0;
  std::int32_t route = -1;           ///< index into Plan::routes, set by the route pass
  std::int32_t channel = 0;          ///< set by the channels pass
  std::int32_t stage = 0;            ///< which step of the program made it (program order)
  std::int32_t round = 0;            ///< the pattern's round within the step
  std::int32_t piece = 0;            ///< which piece of data, for spreading over channels
  std::int32_t slice = 0;            ///< which of the `pipeline` slices of the piece
  bool reduce = false;               ///< the receiver adds the data into its own (Reduce-Scatter)
  std::int32_t explicit_route = -1;  ///< index into Plan::explicit_routes, -1 = route it
  std::int32_t avoid_set = 0;        ///< index into Plan::avoid_sets (0: avoid nothing)
  std::int32_t statement = -1;       ///< index into Plan::statements: the step that made it
  double start_us = 0;               ///< estimated by the order pass
  double finish_us = 0;
  Interval data;
};

/// Where a statement is in the program text (1-based), so that passes after evaluation can
/// point their errors at the step responsible.
struct StatementPos {
  int line = 0;
  int column = 0;
  /// Its ranks' own data is paced by the order pass (a tree packing, where what a rank
  /// forwards would otherwise wait behind all it originates).
  bool paced = false;
  bool operator==(const StatementPos&) const = default;
};

struct Plan {
  std::int32_t ranks = 0;
  std::int32_t pipeline = 1;  ///< the program's `pipeline` depth
  std::int32_t channels = 1;  ///< the program's `channels`
  /// The program's `protocol`, when it forces one; otherwise the compiler chooses per size.
  std::optional<topology::Protocol> protocol;
  std::int64_t chunks = 0;          ///< set by assign_chunks
  std::vector<Transfer> transfers;  ///< every dependency points to a lower index
  /// deps[t]: the transfers whose data transfers[t]'s sender must hold (All-Gather: the one
  /// that delivered it) or have added in (Reduce-Scatter: its children's) before it starts.
  IndexLists deps;
  std::vector<std::vector<topology::NodeId>>
      explicit_routes;                                    ///< node paths from `route` and `bfs`
  std::vector<std::vector<topology::LinkId>> avoid_sets;  ///< [0] is empty
  std::vector<std::vector<topology::LinkId>> routes;      ///< link paths, set by the route pass
  std::vector<StatementPos> statements;                   ///< the steps transfers come from

  /// Appends a transfer that waits for `dependencies` (all lower indices).
  void add(Transfer transfer, std::span<const std::int32_t> dependencies) {
    transfers.push_back(std::move(transfer));
    deps.push_back(dependencies);
  }
  std::span<const topology::LinkId> route_of(const Transfer& t) const {
    if (t.route < 0) return {};
    return routes[static_cast<std::size_t>(t.route)];
  }
};

}  // namespace optiflow::compiler
