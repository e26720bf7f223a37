// The verifier's race analysis (docs/schedule-ir.md, "Verification", step 3). Two accesses to one
// chunk slot, at least one of them a write, race when nothing orders them: no chain of order
// edges (a block runs its steps in order; a step waits for its deps; the k-th send on a
// connection happens before the k-th receive, connections being unbounded FIFOs) leads from one
// to the other, so some execution runs them in either order. Without races every execution
// reads and writes the same values, and the one symbolic execution speaks for all of them.
//
// The method is exact:
//  1. Take one topological order of the happens-before graph: the symbolic execution's. An
//     access placed earlier in it can never be ordered after one placed later.
//  2. List each slot's accesses in that order. The slot is race-free iff every read happens
//     after the write before it, and every write after the reads since that write (or, with
//     none, after the write itself): then all its conflicting pairs are ordered, by
//     transitivity. A query that fails names a racing pair. That is one query per access.
//  3. Answer each query with HappensBefore (verifier_happens_before.hpp): fast paths inside a
//     rank, else a search bounded by two topological orders.
#include "verifier_happens_before.hpp"
#include "verifier_model.hpp"

namespace optiflow::schedule::verifier_detail {
namespace {

// One read or write of a slot by a step, in 32 bits (steps are fewer than 2^31).
class Access {
 public:
  Access(StepId step, bool writes) : packed_(step << 1 | (writes ? 1u : 0u)) {}
  StepId step() const { return packed_ >> 1; }
  bool writes() const { return (packed_ & 1u) != 0; }

 private:
  std::uint32_t packed_;
};

// Calls visit(slot, writes) for every chunk the step reads and writes, reads first.
template <typename Visit>
void for_each_access(const FlatSchedule& flat, const BufferLayout& layout, StepId id,
                     Visit&& visit) {
  const Step& step = flat.step(id);
  const Operands uses = operands(step.kind);
  const std::int32_t rank = flat.rank_of(id);
  for (std::int32_t i = 0; i < step.count; ++i) {
    if (uses.reads_src)
      visit(layout.slot(rank, step.src_buf, std::int64_t{step.src_off} + i), false);
    if (uses.reads_dst)
      visit(layout.slot(rank, step.dst_buf, std::int64_t{step.dst_off} + i), false);
    if (uses.writes_dst)
      visit(layout.slot(rank, step.dst_buf, std::int64_t{step.dst_off} + i), true);
  }
}

static_assert(kMaxAccesses < (std::uint64_t{1} << 32));

// Every slot's accesses, in the order's order (buckets filled by a counting sort).
class SlotAccesses {
 public:
  SlotAccesses(const FlatSchedule& flat, const BufferLayout& layout, std::span<const StepId> order)
      : begin_(layout.slot_count + 1, 0) {
    for (StepId id : order)
      for_each_access(flat, layout, id, [&](std::size_t slot, bool) { ++begin_[slot + 1]; });
    for (std::size_t slot = 0; slot < layout.slot_count; ++slot) begin_[slot + 1] += begin_[slot];
    accesses_.resize(begin_.back(), Access(0, false));
    std::vector<std::uint32_t> next(begin_.begin(), begin_.end() - 1);
    for (StepId id : order)
      for_each_access(flat, layout, id, [&](std::size_t slot, bool writes) {
        accesses_[next[slot]++] = {id, writes};
      });
  }

  std::size_t slot_count() const { return begin_.size() - 1; }
  std::span<const Access> of(std::size_t slot) const {
    return std::span<const Access>(accesses_).subspan(begin_[slot],
                                                      begin_[slot + 1] - begin_[slot]);
  }

 private:
  std::vector<std::uint32_t> begin_;  // per slot, into accesses_ (fewer than kMaxAccesses)
  std::vector<Access> accesses_;
};

class RaceFinder {
 public:
  RaceFinder(const FlatSchedule& flat, const BufferLayout& layout, std::span<const StepId> order,
             Diagnostics& diagnostics)
      : flat_(flat),
        layout_(layout),
        diag_(diagnostics),
        happens_before_(flat, order),
        accesses_(flat, layout, order) {}

  void run() {
    for (std::size_t slot = 0; slot < accesses_.slot_count(); ++slot) {
      check_slot(slot);
      if (happens_before_.exhausted()) {
        report_exhausted();
        return;
      }
    }
  }

 private:
  // Step 2 of the method: each access against the accesses it must come after.
  void check_slot(std::size_t slot) {
    const std::span<const Access> accesses = accesses_.of(slot);
    const Access* last_write = nullptr;
    std::size_t reads_since = 0;  // the first read after last_write
    for (std::size_t i = 0; i < accesses.size(); ++i) {
      const Access& access = accesses[i];
      if (!access.writes()) {
        if (last_write != nullptr) require_order(slot, *last_write, access);
        continue;
      }
      // After a read in between, last write -> read -> this write already orders the writes.
      if (last_write != nullptr && reads_since == i) require_order(slot, *last_write, access);
      for (std::size_t r = reads_since; r < i; ++r) require_order(slot, accesses[r], access);
      last_write = &access;
      reads_since = i + 1;
    }
  }

  void require_order(std::size_t slot, Access first, Access second) {
    if (happens_before_.precedes(first.step(), second.step()) || happens_before_.exhausted())
      return;
    // A step pair that races on several chunks is one error.
    if (first.step() == last_race_.first && second.step() == last_race_.second) return;
    last_race_ = {first.step(), second.step()};
    diag_.report([&] { return race_text(slot, first, second); });
  }

  void report_exhausted() {
    diag_.report([] {
      return "the race analysis gave up: ordering the accesses took more than " +
             std::to_string(HappensBefore::kMaxSearchSteps) +
             " steps of search, the verifier's limit, so no execution order is proved";
    });
  }

  // "race on rank 1's output chunk 1: rank 1 tb 0 step 3 (s) reads it and rank 1 tb 1 step 1
  // (r) writes it, and nothing orders the two steps (a missing dependency?)"
  std::string race_text(std::size_t slot, Access first, Access second) const {
    const std::int32_t rank = flat_.rank_of(first.step());
    const auto [buffer, chunk] = chunk_of(slot, first);
    const auto [second_buffer, second_chunk] = chunk_of(slot, second);
    auto verb = [](Access access) { return access.writes() ? " writes it" : " reads it"; };
    std::string text = "race on rank " + std::to_string(rank) + "'s " + chunk_label(buffer, chunk) +
                       ": " + step_label(flat_, first.step()) + verb(first) + " and " +
                       step_label(flat_, second.step()) + verb(second);
    if (second_buffer != buffer) text += " (as " + chunk_label(second_buffer, second_chunk) + ")";
    return text + ", and nothing orders the two steps (a missing dependency?)";
  }

  // The buffer and chunk by which the access names the slot (in place, buffers alias).
  std::pair<BufferKind, std::int64_t> chunk_of(std::size_t slot, Access access) const {
    const Step& step = flat_.step(access.step());
    const RankLayout& layout =
        layout_.ranks[static_cast<std::size_t>(flat_.rank_of(access.step()))];
    auto covers = [&](BufferKind buffer, std::int32_t offset) {
      const std::size_t first = layout[buffer].base + static_cast<std::size_t>(offset);
      return slot >= first && slot - first < static_cast<std::size_t>(step.count);
    };
    const bool src =
        !access.writes() && operands(step.kind).reads_src && covers(step.src_buf, step.src_off);
    const BufferKind buffer = src ? step.src_buf : step.dst_buf;
    return {buffer, static_cast<std::int64_t>(slot - layout[buffer].base)};
  }

  const FlatSchedule& flat_;
  const BufferLayout& layout_;
  Diagnostics& diag_;
  HappensBefore happens_before_;
  SlotAccesses accesses_;
  std::pair<StepId, StepId> last_race_{kNoStep, kNoStep};
};

}  // namespace

void report_races(const FlatSchedule& flat, const BufferLayout& layout,
                  std::span<const StepId> order, Diagnostics& diagnostics) {
  RaceFinder(flat, layout, order, diagnostics).run();
}

}  // namespace optiflow::schedule::verifier_detail
