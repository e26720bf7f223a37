// The schedule verifier (docs/schedule-ir.md, "Verification"): structural checks, then symbolic
// execution of every step on values (chunk index, contributing ranks), then the collective's
// postcondition, chunk by chunk.
#include "optiflow/core/verifier.hpp"

#include <algorithm>
#include <array>
#include <cstdint>
#include <deque>
#include <functional>
#include <limits>
#include <map>
#include <optional>
#include <queue>
#include <span>
#include <string_view>
#include <tuple>
#include <utility>

namespace optiflow::core {
namespace {

using StepId = std::uint32_t;   // dense over all steps, in (rank, tb, step) order
using BlockId = std::int32_t;   // dense over all thread blocks, in (rank, tb) order
using ValueId = std::uint32_t;  // an interned value, see ValueTable

constexpr StepId kNoStep = std::numeric_limits<StepId>::max();
constexpr BlockId kNoBlock = -1;
constexpr std::int32_t kNoConnection = -1;
constexpr ValueId kNoValue = 0;   // the chunk holds nothing yet
constexpr ValueId kBadValue = 1;  // the result of an operation already reported as an error

// Malformed sizes must not exhaust memory: past these the verifier would need gigabytes.
constexpr std::size_t kMaxSlots = std::size_t{1} << 27;
constexpr std::size_t kMaxSteps = std::size_t{1} << 30;
// How much of a deadlock and of a rank set to spell out.
constexpr std::size_t kDeadlockExamples = 4;
constexpr std::size_t kCycleStepsShown = 6;
constexpr std::size_t kRangesShown = 8;

// Collects errors into a VerifyResult. Text is built only while there is room for it, so a
// schedule with a million wrong chunks costs a million increments, not a million strings.
class Diagnostics {
 public:
  explicit Diagnostics(VerifyResult& result) : result_(result) {}

  /// Counts one error; returns the index of its text when it was kept.
  template <typename MakeText>
  std::optional<std::size_t> report(MakeText&& make_text) {
    ++result_.error_count;
    if (result_.errors.size() >= VerifyResult::kMaxReported) return std::nullopt;
    result_.errors.push_back(make_text());
    return result_.errors.size() - 1;
  }
  void append(std::size_t index, std::string_view text) { result_.errors[index] += text; }
  std::size_t count() const { return result_.error_count; }

 private:
  VerifyResult& result_;
};

// ---- Names in messages --------------------------------------------------------------------

constexpr std::array<std::string_view, 3> kBufferNames = {"input", "output", "scratch"};

bool is_valid(BufferKind kind) {
  return static_cast<std::size_t>(kind) < kBufferNames.size();
}
bool is_valid(StepKind kind) {
  return kind <= StepKind::nop;
}
std::string_view buffer_name(BufferKind kind) {
  return kBufferNames[static_cast<std::size_t>(kind)];
}

std::string block_label(std::int32_t rank, std::int64_t tb) {
  return "rank " + std::to_string(rank) + " tb " + std::to_string(tb);
}

std::string step_label(std::int32_t rank, std::int64_t tb, std::int64_t step, StepKind kind) {
  const std::string kind_name = is_valid(kind) ? std::string(to_string(kind))
                                               : "kind " + std::to_string(static_cast<int>(kind));
  return block_label(rank, tb) + " step " + std::to_string(step) + " (" + kind_name + ")";
}

std::string chunk_label(BufferKind buffer, std::int64_t chunk) {
  return std::string(buffer_name(buffer)) + " chunk " + std::to_string(chunk);
}

std::string plural(std::int64_t n, std::string_view noun) {
  return std::to_string(n) + " " + std::string(noun) + (n == 1 ? "" : "s");
}

// ---- Values -------------------------------------------------------------------------------

// A set of ranks as sorted, disjoint, non-adjacent half-open ranges. Ring and tree reductions
// build contiguous sets, so even a partial sum over 1024 ranks takes one or two ranges.
struct RankRange {
  std::int32_t begin = 0;
  std::int32_t end = 0;
  bool operator==(const RankRange&) const = default;
};

bool is_single(std::span<const RankRange> ranks) {
  return ranks.size() == 1 && ranks[0].end - ranks[0].begin == 1;
}

// "{0,1,2}", "{0-511,700}"; long sets are cut short.
std::string format_ranks(std::span<const RankRange> ranks) {
  std::string text = "{";
  for (std::size_t i = 0; i < ranks.size(); ++i) {
    if (i == kRangesShown) return text + ",...}";
    if (i > 0) text += ",";
    const auto [begin, end] = ranks[i];
    if (end - begin > 3) {
      text += std::to_string(begin) + "-" + std::to_string(end - 1);
      continue;
    }
    for (std::int32_t rank = begin; rank < end; ++rank)
      text += (rank > begin ? "," : "") + std::to_string(rank);
  }
  return text + "}";
}

// "3" for one rank, else as format_ranks.
std::string format_rank_or_ranks(std::span<const RankRange> ranks) {
  return is_single(ranks) ? std::to_string(ranks[0].begin) : format_ranks(ranks);
}

std::vector<RankRange> complement(std::span<const RankRange> ranks, std::int32_t rank_count) {
  std::vector<RankRange> missing;
  std::int32_t next = 0;
  for (const RankRange& range : ranks) {
    if (range.begin > next) missing.push_back({next, range.begin});
    next = range.end;
  }
  if (next < rank_count) missing.push_back({next, rank_count});
  return missing;
}

// Interned values (chunk index, contributing ranks): a chunk slot or a message holds a 4-byte
// id, so moving All-Gather data never copies a set. Values are immutable; a sum is a new value.
class ValueTable {
 public:
  ValueTable() : entries_(2) {}  // kNoValue and kBadValue

  ValueId single(std::int32_t chunk, std::int32_t rank) {
    entries_.push_back(Entry{chunk, 1, ranges_.size()});
    ranges_.push_back(RankRange{rank, rank + 1});
    return static_cast<ValueId>(entries_.size() - 1);
  }

  std::int32_t chunk(ValueId value) const { return entries_[value].chunk; }
  std::span<const RankRange> ranks(ValueId value) const {
    const Entry& entry = entries_[value];
    return std::span<const RankRange>(ranges_).subspan(entry.first, entry.size);
  }
  bool same(ValueId a, ValueId b) const {
    return a == b || (chunk(a) == chunk(b) && std::ranges::equal(ranks(a), ranks(b)));
  }

  /// a + b for two values of one chunk; kBadValue when they share contributors, which are then
  /// listed in `twice`.
  ValueId add(ValueId a, ValueId b, std::vector<RankRange>& twice) {
    const Entry left = entries_[a];
    const Entry right = entries_[b];
    const std::size_t start = ranges_.size();
    std::size_t i = left.first, j = right.first;
    const std::size_t i_end = left.first + left.size, j_end = right.first + right.size;
    while (i < i_end || j < j_end) {
      const bool take_left = j == j_end || (i < i_end && ranges_[i].begin <= ranges_[j].begin);
      const RankRange next = take_left ? ranges_[i++] : ranges_[j++];
      // Each input is disjoint and sorted, so an overlap with what is merged so far is an
      // overlap with the other input.
      if (ranges_.size() > start && next.begin <= ranges_.back().end) {
        RankRange& last = ranges_.back();
        if (next.begin < last.end) twice.push_back({next.begin, std::min(next.end, last.end)});
        last.end = std::max(last.end, next.end);
        continue;
      }
      ranges_.push_back(next);
    }
    if (!twice.empty()) {
      ranges_.resize(start);
      return kBadValue;
    }
    entries_.push_back(
        Entry{left.chunk, static_cast<std::uint32_t>(ranges_.size() - start), start});
    return static_cast<ValueId>(entries_.size() - 1);
  }

  /// "rank 2's chunk 8" or "the sum of chunk 8 over ranks {0,1,2}".
  std::string describe(ValueId value) const {
    const std::string chunk_text = "chunk " + std::to_string(chunk(value));
    const auto contributors = ranks(value);
    if (is_single(contributors))
      return "rank " + std::to_string(contributors[0].begin) + "'s " + chunk_text;
    return "the sum of " + chunk_text + " over ranks " + format_ranks(contributors);
  }

 private:
  struct Entry {
    std::int32_t chunk = -1;
    std::uint32_t size = 0;
    std::size_t first = 0;  // into ranges_
  };
  std::vector<Entry> entries_;
  std::vector<RankRange> ranges_;
};

// ---- The schedule, flattened for execution ------------------------------------------------

// The collective's shape: the table in docs/schedule-ir.md.
struct Shape {
  Collective collective = Collective::all_gather;
  std::int32_t ranks = 0;
  std::int32_t chunks = 0;
  std::int32_t slice = 0;  // s = chunks / ranks, one rank's share
  bool inplace = false;

  bool gathers() const { return collective == Collective::all_gather; }
  /// The size of the input or output buffer, aliased or not.
  std::int32_t buffer_chunks(BufferKind kind) const {
    if (kind == BufferKind::input) return gathers() ? slice : chunks;
    return collective == Collective::reduce_scatter ? slice : chunks;
  }
  /// Whether, in place, the buffer is (part of) the other one: MSCCL then declares it with 0
  /// chunks (i_chunks="0" for All-Gather, o_chunks="0" for All-Reduce).
  bool aliased(BufferKind kind) const {
    if (!inplace) return false;
    if (collective == Collective::all_reduce) return true;
    return kind == (gathers() ? BufferKind::input : BufferKind::output);
  }
};

// Which of its buffer operands a step kind uses.
struct Operands {
  bool src = false;
  bool dst = false;
};

Operands operands(StepKind kind) {
  switch (kind) {
    case StepKind::send:
    case StepKind::recv_reduce_send:
      return {true, false};
    case StepKind::recv:
    case StepKind::recv_copy_send:
      return {false, true};
    case StepKind::nop:
      return {false, false};
    default:
      return {true, true};
  }
}

struct BufferSpan {
  std::size_t base = 0;  // first slot
  std::int32_t size = 0;
};

// Where a rank's buffers lie in one flat array of chunk slots. In-place aliasing is two buffers
// whose spans overlap, so execution never has to know about it.
struct RankLayout {
  std::array<BufferSpan, 3> buffers;
  BufferSpan& operator[](BufferKind kind) { return buffers[static_cast<std::size_t>(kind)]; }
  const BufferSpan& operator[](BufferKind kind) const {
    return buffers[static_cast<std::size_t>(kind)];
  }
};

struct Block {
  const ThreadBlock* tb = nullptr;
  std::int32_t rank = 0;
  std::int32_t index = 0;  // within its rank
  StepId first = 0;        // the id of its step 0
  std::int32_t send_connection = kNoConnection;
  std::int32_t recv_connection = kNoConnection;

  StepId end() const { return first + static_cast<StepId>(tb->steps.size()); }
};

// A FIFO connection (sender rank, receiver rank, channel) and the blocks at its two ends.
struct Connection {
  std::int32_t src = 0;
  std::int32_t dst = 0;
  std::int32_t channel = 0;
  BlockId sender = kNoBlock;
  BlockId receiver = kNoBlock;
};

// Built by the structural checks; executable only when they pass.
struct Program {
  Shape shape;
  std::vector<RankLayout> layouts;  // per rank
  std::size_t slot_count = 0;
  std::vector<Block> blocks;
  std::vector<BlockId> first_block;  // per rank
  std::vector<Connection> connections;
  std::size_t step_count = 0;

  StepId step_id(std::int32_t rank, StepRef ref) const {
    const Block& block = blocks[static_cast<std::size_t>(first_block[rank] + ref.tb)];
    return block.first + static_cast<StepId>(ref.step);
  }
};

// ---- Structure ----------------------------------------------------------------------------

std::string node_name(const Topology& topology, NodeId node) {
  return node < topology.node_count() ? topology.node(node).id : "no node";
}

std::string link_text(const Topology& topology, LinkId id) {
  const Link& link = topology.link(id);
  return "link " + std::to_string(id) + " (" + node_name(topology, link.src) + " -> " +
         node_name(topology, link.dst) + ")";
}

// Checks everything execution relies on, so that malformed input cannot crash it, and fills
// the Program on the way.
class StructureChecker {
 public:
  StructureChecker(const Schedule& schedule, const Topology* topology, Diagnostics& diagnostics,
                   Program& program)
      : schedule_(schedule), topology_(topology), diag_(diagnostics), program_(program) {}

  /// Reports every structural error; returns whether execution may go ahead.
  bool run() {
    const std::size_t errors_before = diag_.count();
    if (!check_header()) return false;
    check_topology();
    for (std::int32_t rank = 0; rank < schedule_.ranks; ++rank) check_rank(rank);
    check_totals();
    return diag_.count() == errors_before;
  }

 private:
  void error(std::string text) {
    diag_.report([&] { return std::move(text); });
  }

  // Without a sane header, buffer sizes and peers cannot be judged: stop there.
  bool check_header() {
    const std::size_t errors_before = diag_.count();
    const Collective collective = schedule_.collective;
    const std::int32_t ranks = schedule_.ranks;
    const std::int32_t chunks = schedule_.chunks;
    if (collective != Collective::all_gather && collective != Collective::reduce_scatter &&
        collective != Collective::all_reduce)
      error("verifying " + std::string(to_string(collective)) +
            " schedules is not supported (only allgather, reducescatter and allreduce)");
    if (ranks < 1)
      error("the schedule has " + plural(ranks, "rank") + "; it needs at least 1");
    else if (schedule_.programs.size() != static_cast<std::size_t>(ranks))
      error("the schedule has " + plural(ranks, "rank") + " but " +
            plural(static_cast<std::int64_t>(schedule_.programs.size()), "rank program"));
    if (chunks < 1)
      error("chunks is " + std::to_string(chunks) + "; it must be positive");
    else if (ranks >= 1 && collective != Collective::all_reduce && chunks % ranks != 0)
      error("chunks (" + std::to_string(chunks) + ") is not a multiple of the rank count (" +
            std::to_string(ranks) + "), as " + std::string(to_string(collective)) + " requires");
    if (diag_.count() != errors_before) return false;
    program_.shape = Shape{collective, ranks, chunks, chunks / ranks, schedule_.inplace};
    return true;
  }

  void check_topology() {
    if (topology_ == nullptr) return;
    if (topology_->rank_count() == schedule_.ranks) {
      routes_checkable_ = true;
      return;
    }
    error("the schedule has " + plural(schedule_.ranks, "rank") + " but topology '" +
          topology_->name() + "' has " + plural(topology_->rank_count(), "GPU"));
  }

  void check_rank(std::int32_t rank) {
    const RankProgram& program = schedule_.programs[static_cast<std::size_t>(rank)];
    check_buffers(rank, program);
    program_.first_block.push_back(static_cast<BlockId>(program_.blocks.size()));
    for (std::size_t tb = 0; tb < program.tbs.size(); ++tb)
      add_block(rank, static_cast<std::int32_t>(tb), program.tbs[tb]);
    for (std::size_t tb = 0; tb < program.tbs.size(); ++tb)
      for (std::size_t step = 0; step < program.tbs[tb].steps.size(); ++step)
        check_step(rank, static_cast<std::int32_t>(tb), static_cast<std::int32_t>(step));
  }

  void check_buffers(std::int32_t rank, const RankProgram& program) {
    const Shape& shape = program_.shape;
    const std::string needs =
        std::string(to_string(shape.collective)) + (shape.inplace ? " in place" : " out of place") +
        " with " + plural(shape.chunks, "chunk") + " on " + plural(shape.ranks, "rank") + " needs ";
    auto expect = [&](BufferKind kind, std::int32_t have) {
      const std::int32_t want = shape.buffer_chunks(kind);
      if (have == want || (have == 0 && shape.aliased(kind))) return;
      error("rank " + std::to_string(rank) + ": the " + std::string(buffer_name(kind)) +
            " buffer has " + plural(have, "chunk") + "; " + needs + std::to_string(want) +
            (shape.aliased(kind) ? " (or 0, as it is aliased)" : ""));
    };
    expect(BufferKind::input, program.input_chunks);
    expect(BufferKind::output, program.output_chunks);
    if (program.scratch_chunks < 0)
      error("rank " + std::to_string(rank) + ": the scratch buffer has " +
            plural(program.scratch_chunks, "chunk"));
    program_.layouts.push_back(layout(rank, program));
  }

  // The buffers' slots, with the in-place aliasing of docs/schedule-ir.md.
  RankLayout layout(std::int32_t rank, const RankProgram& program) {
    const Shape& shape = program_.shape;
    auto size = [&](BufferKind kind, std::int32_t declared) {
      return shape.aliased(kind) ? shape.buffer_chunks(kind) : std::max(declared, 0);
    };
    const std::int32_t input = size(BufferKind::input, program.input_chunks);
    const std::int32_t output = size(BufferKind::output, program.output_chunks);
    const auto own_slice = static_cast<std::size_t>(rank) * static_cast<std::size_t>(shape.slice);
    std::size_t& next = program_.slot_count;
    RankLayout layout;
    if (shape.inplace && shape.gathers()) {
      layout[BufferKind::output] = {next, output};
      layout[BufferKind::input] = {next + own_slice, input};
      next += static_cast<std::size_t>(output);
    } else if (shape.inplace && shape.collective == Collective::reduce_scatter) {
      layout[BufferKind::input] = {next, input};
      layout[BufferKind::output] = {next + own_slice, output};
      next += static_cast<std::size_t>(input);
    } else if (shape.inplace) {
      layout[BufferKind::input] = {next, input};
      layout[BufferKind::output] = {next, output};
      next += static_cast<std::size_t>(std::max(input, output));
    } else {
      layout[BufferKind::input] = {next, input};
      layout[BufferKind::output] = {next + static_cast<std::size_t>(input), output};
      next += static_cast<std::size_t>(input) + static_cast<std::size_t>(output);
    }
    const std::int32_t scratch = std::max(program.scratch_chunks, 0);
    layout[BufferKind::scratch] = {next, scratch};
    next += static_cast<std::size_t>(scratch);
    return layout;
  }

  void add_block(std::int32_t rank, std::int32_t index, const ThreadBlock& tb) {
    const auto id = static_cast<BlockId>(program_.blocks.size());
    Block block{&tb, rank, index, static_cast<StepId>(program_.step_count)};
    const std::string where = block_label(rank, index) + ": ";
    if (tb.channel < 0) error(where + "channel " + std::to_string(tb.channel) + " is negative");
    if (check_peer(rank, where, tb.send_peer, "send"))
      block.send_connection = connect(rank, tb.send_peer, tb.channel, id, true, where);
    if (check_peer(rank, where, tb.recv_peer, "receive"))
      block.recv_connection = connect(tb.recv_peer, rank, tb.channel, id, false, where);
    program_.blocks.push_back(block);
    program_.step_count += tb.steps.size();
  }

  bool check_peer(std::int32_t rank, const std::string& where, std::int32_t peer,
                  std::string_view role) {
    if (peer == -1) return false;
    if (peer < -1 || peer >= schedule_.ranks) {
      error(where + std::string(role) + " peer " + std::to_string(peer) + " is not a rank (0.." +
            std::to_string(schedule_.ranks - 1) + ") nor -1");
      return false;
    }
    if (peer == rank) {
      error(where + std::string(role) + " peer " + std::to_string(peer) + " is the rank itself");
      return false;
    }
    return true;
  }

  std::int32_t connect(std::int32_t src, std::int32_t dst, std::int32_t channel, BlockId block,
                       bool sending, const std::string& where) {
    const auto next = static_cast<std::int32_t>(program_.connections.size());
    const auto [it, inserted] = connection_index_.try_emplace({src, dst, channel}, next);
    if (inserted) program_.connections.push_back(Connection{src, dst, channel});
    Connection& connection = program_.connections[static_cast<std::size_t>(it->second)];
    BlockId& end = sending ? connection.sender : connection.receiver;
    if (end == kNoBlock) {
      end = block;
    } else {
      const std::int32_t other = program_.blocks[static_cast<std::size_t>(end)].index;
      error(where +
            (sending ? "sends to rank " + std::to_string(dst)
                     : "receives from rank " + std::to_string(src)) +
            " on channel " + std::to_string(channel) + ", as tb " + std::to_string(other) +
            " does already");
    }
    return it->second;
  }

  // A step under check; its label is built only for an error, as most steps have none.
  struct Place {
    std::int32_t rank;
    std::int32_t tb;
    std::int32_t index;
    const Step& step;
    std::string where() const { return step_label(rank, tb, index, step.kind) + ": "; }
  };

  void check_step(std::int32_t rank, std::int32_t tb_index, std::int32_t index) {
    const ThreadBlock& tb = schedule_.programs[static_cast<std::size_t>(rank)].tbs[tb_index];
    const Step& step = tb.steps[static_cast<std::size_t>(index)];
    const Place place{rank, tb_index, index, step};
    if (!is_valid(step.kind)) {
      error(place.where() + "unknown step kind");
      return;
    }
    check_deps(place);
    check_route(place, tb.send_peer);
    if (step.kind == StepKind::nop) return;
    if (step.count < 1)
      error(place.where() + "count " + std::to_string(step.count) + " is not positive");
    if (step_sends(step.kind) && tb.send_peer == -1)
      error(place.where() + "sends, but tb " + std::to_string(tb_index) + " has no send peer");
    if (step_receives(step.kind) && tb.recv_peer == -1)
      error(place.where() + "receives, but tb " + std::to_string(tb_index) +
            " has no receive peer");
    const Operands uses = operands(step.kind);
    if (uses.src) check_operand(place, "src", step.src_buf, step.src_off);
    if (uses.dst) check_operand(place, "dst", step.dst_buf, step.dst_off);
  }

  void check_operand(const Place& place, std::string_view role, BufferKind buffer,
                     std::int32_t offset) {
    const std::int32_t count = place.step.count;
    if (!is_valid(buffer)) {
      error(place.where() + std::string(role) + " buffer " +
            std::to_string(static_cast<int>(buffer)) + " is not input, output or scratch");
      return;
    }
    if (count < 1) return;  // reported with the step
    const BufferSpan& span = program_.layouts[static_cast<std::size_t>(place.rank)][buffer];
    const std::int64_t end = std::int64_t{offset} + count;
    if (offset >= 0 && end <= span.size) return;
    error(place.where() + std::string(role) + " " + std::string(buffer_name(buffer)) + " chunks [" +
          std::to_string(offset) + ", " + std::to_string(end) + ") lie outside the " +
          std::string(buffer_name(buffer)) + " buffer (" + plural(span.size, "chunk") + ")");
  }

  void check_deps(const Place& place) {
    const auto& tbs = schedule_.programs[static_cast<std::size_t>(place.rank)].tbs;
    for (const StepRef& dep : place.step.deps) {
      if (dep.tb < 0 || static_cast<std::size_t>(dep.tb) >= tbs.size()) {
        error(place.where() + "depends on tb " + std::to_string(dep.tb) +
              ", which does not exist (rank " + std::to_string(place.rank) + " has " +
              plural(static_cast<std::int64_t>(tbs.size()), "thread block") + ")");
        continue;
      }
      const std::size_t steps = tbs[static_cast<std::size_t>(dep.tb)].steps.size();
      if (dep.step < 0 || static_cast<std::size_t>(dep.step) >= steps) {
        error(place.where() + "depends on tb " + std::to_string(dep.tb) + " step " +
              std::to_string(dep.step) + ", which does not exist (tb " + std::to_string(dep.tb) +
              " has " + plural(static_cast<std::int64_t>(steps), "step") + ")");
        continue;
      }
      if (dep.tb == place.tb && dep.step >= place.index)
        error(place.where() + "depends on step " + std::to_string(dep.step) +
              " of its own thread block, which can only run after it");
    }
  }

  void check_route(const Place& place, std::int32_t peer) {
    const Step& step = place.step;
    const std::int32_t rank = place.rank;
    if (step.route.empty()) return;
    if (!step_sends(step.kind)) {
      error(place.where() + "has a route but sends nothing");
      return;
    }
    if (!routes_checkable_ || peer < 0 || peer >= schedule_.ranks || peer == rank) return;
    const Topology& topology = *topology_;
    for (LinkId id : step.route) {
      if (id >= topology.link_count()) {
        error(place.where() + "route link " + std::to_string(id) + " does not exist (topology '" +
              topology.name() + "' has " +
              plural(static_cast<std::int64_t>(topology.link_count()), "link") + ")");
        return;
      }
    }
    const NodeId from = topology.gpu_of_rank(rank);
    const NodeId to = topology.gpu_of_rank(peer);
    if (topology.link(step.route.front()).src != from)
      error(place.where() + "route starts with " + link_text(topology, step.route.front()) +
            ", not at rank " + std::to_string(rank) + "'s GPU " + node_name(topology, from));
    for (std::size_t i = 1; i < step.route.size(); ++i) {
      if (topology.link(step.route[i - 1]).dst == topology.link(step.route[i]).src) continue;
      error(place.where() + "route breaks between " + link_text(topology, step.route[i - 1]) +
            " and " + link_text(topology, step.route[i]));
      break;
    }
    if (topology.link(step.route.back()).dst != to)
      error(place.where() + "route ends with " + link_text(topology, step.route.back()) +
            ", not at rank " + std::to_string(peer) + "'s GPU " + node_name(topology, to));
  }

  void check_totals() {
    if (program_.slot_count > kMaxSlots)
      error("the buffers of all ranks hold " +
            plural(static_cast<std::int64_t>(program_.slot_count), "chunk") +
            ", more than the verifier's limit of " + std::to_string(kMaxSlots));
    if (program_.step_count > kMaxSteps)
      error("the schedule has " + plural(static_cast<std::int64_t>(program_.step_count), "step") +
            ", more than the verifier's limit of " + std::to_string(kMaxSteps));
  }

  const Schedule& schedule_;
  const Topology* topology_;
  Diagnostics& diag_;
  Program& program_;
  bool routes_checkable_ = false;
  std::map<std::tuple<std::int32_t, std::int32_t, std::int32_t>, std::int32_t> connection_index_;
};

// ---- Execution ----------------------------------------------------------------------------

// Runs a structurally sound Program on symbolic values with unbounded connection buffers.
class Executor {
 public:
  Executor(const Program& program, Diagnostics& diagnostics)
      : program_(program),
        diag_(diagnostics),
        slots_(program.slot_count, kNoValue),
        writers_(program.slot_count, kNoStep),
        mailboxes_(program.connections.size()) {
    index_steps();
    load_inputs();
  }

  /// Runs every step that can run, non-receiving steps first and ties by (rank, tb), so that a
  /// missing dependency on a receive shows up as a read of an empty chunk. Returns the count.
  std::size_t run() {
    for (StepId id = 0; id < program_.step_count; ++id)
      if (pending_[id] == 0) make_ready(id);
    while (true) {
      auto& queue = !local_ready_.empty() ? local_ready_ : recv_ready_;
      if (queue.empty()) break;
      const StepId id = queue.top();
      queue.pop();
      execute(id);
      complete(id);
    }
    add_read_hints();
    return executed_;
  }

  /// Reports the steps that never ran, what they wait for, and a wait cycle when there is one.
  void report_deadlock() const;
  void report_unreceived() const;
  void check_postcondition() const;

 private:
  struct StepAt {
    const Block& block;
    const Step& step;
    std::int32_t index;  // within its block
  };
  struct Message {
    StepId sender = kNoStep;
    std::int32_t count = 0;
  };
  // What one connection holds: its messages in order, their values back to back.
  struct Mailbox {
    std::deque<Message> messages;
    std::deque<ValueId> values;
    std::size_t sent = 0;
    StepId waiting = kNoStep;  // the receive that is ready but for a message
  };
  // An empty read whose message gets a hint once execution shows who writes the chunk.
  struct ReadHint {
    std::size_t message = 0;
    std::size_t slot = 0;
    StepId reader = kNoStep;
  };
  using ReadyQueue = std::priority_queue<StepId, std::vector<StepId>, std::greater<>>;

  StepAt at(StepId id) const {
    const Block& block = program_.blocks[block_of_[id]];
    const auto index = static_cast<std::int32_t>(id - block.first);
    return {block, block.tb->steps[static_cast<std::size_t>(index)], index};
  }
  std::string label(StepId id) const {
    const StepAt here = at(id);
    return step_label(here.block.rank, here.block.index, here.index, here.step.kind);
  }
  const RankLayout& layout(std::int32_t rank) const {
    return program_.layouts[static_cast<std::size_t>(rank)];
  }
  std::size_t slot_of(BufferKind buffer, std::int64_t chunk) const {
    return layout(rank_)[buffer].base + static_cast<std::size_t>(chunk);
  }

  void index_steps();
  void load_inputs();
  void make_ready(StepId id);
  void complete(StepId id);
  void execute(StepId id);
  ValueId compute(const Step& step, std::int32_t i);
  ValueId read(BufferKind buffer, std::int64_t chunk);
  ValueId add(ValueId local, ValueId other, BufferKind buffer, std::int64_t chunk);
  void write(BufferKind buffer, std::int64_t chunk, ValueId value);
  void receive(std::int32_t connection, std::int32_t count);
  void send(std::int32_t connection, StepId sender, std::int32_t count);
  void add_read_hints();

  BlockId blocker(StepId head, const std::vector<StepId>& heads) const;
  std::string wait_text(StepId head, const std::vector<StepId>& heads) const;
  void check_gathered(std::int32_t rank, std::int32_t chunk, ValueId value) const;
  void check_reduced(std::int32_t rank, std::int32_t index, std::int32_t chunk,
                     ValueId value) const;

  const Program& program_;
  Diagnostics& diag_;
  ValueTable values_;
  std::vector<ValueId> slots_;
  std::vector<StepId> writers_;        // per slot: the last step that wrote it
  std::vector<BlockId> block_of_;      // per step
  std::vector<std::int32_t> pending_;  // per step: predecessors not yet complete
  std::vector<bool> done_;
  std::vector<std::size_t> dependents_begin_;  // per step, into dependents_ (CSR)
  std::vector<StepId> dependents_;
  std::vector<Mailbox> mailboxes_;  // per connection
  ReadyQueue local_ready_;
  ReadyQueue recv_ready_;
  std::size_t executed_ = 0;
  std::vector<ReadHint> read_hints_;

  // The step being executed, for messages; and scratch space reused across steps.
  StepId current_ = kNoStep;
  std::int32_t rank_ = 0;
  std::vector<ValueId> received_;
  std::vector<ValueId> results_;
  std::vector<RankRange> twice_;
};

// Predecessor counts and the reverse dependency edges, so completing a step touches only its
// successors: the run is linear in steps plus dependencies.
void Executor::index_steps() {
  const std::size_t steps = program_.step_count;
  block_of_.resize(steps);
  pending_.assign(steps, 0);
  done_.assign(steps, false);
  dependents_begin_.assign(steps + 1, 0);
  for (std::size_t b = 0; b < program_.blocks.size(); ++b) {
    const Block& block = program_.blocks[b];
    for (StepId id = block.first; id < block.end(); ++id) {
      const Step& step = block.tb->steps[id - block.first];
      block_of_[id] = static_cast<BlockId>(b);
      pending_[id] = (id > block.first ? 1 : 0) + static_cast<std::int32_t>(step.deps.size());
      for (const StepRef& dep : step.deps)
        ++dependents_begin_[program_.step_id(block.rank, dep) + 1];
    }
  }
  for (std::size_t id = 0; id < steps; ++id) dependents_begin_[id + 1] += dependents_begin_[id];
  dependents_.resize(dependents_begin_[steps]);
  std::vector<std::size_t> fill(dependents_begin_.begin(), dependents_begin_.end() - 1);
  for (const Block& block : program_.blocks)
    for (StepId id = block.first; id < block.end(); ++id)
      for (const StepRef& dep : block.tb->steps[id - block.first].deps)
        dependents_[fill[program_.step_id(block.rank, dep)]++] = id;
}

void Executor::load_inputs() {
  const Shape& shape = program_.shape;
  for (std::int32_t rank = 0; rank < shape.ranks; ++rank) {
    const BufferSpan& input = layout(rank)[BufferKind::input];
    for (std::int32_t j = 0; j < input.size; ++j) {
      const std::int32_t chunk = shape.gathers() ? rank * shape.slice + j : j;
      slots_[input.base + static_cast<std::size_t>(j)] = values_.single(chunk, rank);
    }
  }
}

void Executor::make_ready(StepId id) {
  const StepAt here = at(id);
  if (!step_receives(here.step.kind)) {
    local_ready_.push(id);
    return;
  }
  Mailbox& mailbox = mailboxes_[static_cast<std::size_t>(here.block.recv_connection)];
  if (mailbox.messages.empty())
    mailbox.waiting = id;
  else
    recv_ready_.push(id);
}

void Executor::complete(StepId id) {
  done_[id] = true;
  ++executed_;
  auto release = [&](StepId next) {
    if (--pending_[next] == 0) make_ready(next);
  };
  if (id + 1 < program_.blocks[block_of_[id]].end()) release(id + 1);
  for (std::size_t i = dependents_begin_[id]; i < dependents_begin_[id + 1]; ++i)
    release(dependents_[i]);
}

void Executor::execute(StepId id) {
  const StepAt here = at(id);
  const Step& step = here.step;
  if (step.kind == StepKind::nop) return;
  current_ = id;
  rank_ = here.block.rank;
  if (step_receives(step.kind)) receive(here.block.recv_connection, step.count);
  results_.clear();
  for (std::int32_t i = 0; i < step.count; ++i) results_.push_back(compute(step, i));
  if (operands(step.kind).dst)
    for (std::int32_t i = 0; i < step.count; ++i)
      write(step.dst_buf, std::int64_t{step.dst_off} + i, results_[static_cast<std::size_t>(i)]);
  if (step_sends(step.kind)) send(here.block.send_connection, id, step.count);
}

// The value the step produces for its i-th chunk (what it stores, sends, or both).
ValueId Executor::compute(const Step& step, std::int32_t i) {
  const std::int64_t src = std::int64_t{step.src_off} + i;
  const std::int64_t dst = std::int64_t{step.dst_off} + i;
  const auto nth = static_cast<std::size_t>(i);
  switch (step.kind) {
    case StepKind::send:
    case StepKind::copy:
      return read(step.src_buf, src);
    case StepKind::recv:
    case StepKind::recv_copy_send:
      return received_[nth];
    case StepKind::recv_reduce_copy:
    case StepKind::recv_reduce_send:
    case StepKind::recv_reduce_copy_send:
      return add(read(step.src_buf, src), received_[nth], step.src_buf, src);
    case StepKind::reduce: {
      const ValueId into = read(step.dst_buf, dst);
      return add(into, read(step.src_buf, src), step.dst_buf, dst);
    }
    case StepKind::nop:
      break;
  }
  return kBadValue;
}

ValueId Executor::read(BufferKind buffer, std::int64_t chunk) {
  const std::size_t slot = slot_of(buffer, chunk);
  if (slots_[slot] != kNoValue) return slots_[slot];
  const auto kept = diag_.report(
      [&] { return label(current_) + ": " + chunk_label(buffer, chunk) + " holds no data yet"; });
  if (kept) read_hints_.push_back({*kept, slot, current_});
  // Reported once here; kBadValue keeps the steps downstream from repeating it.
  return kBadValue;
}

ValueId Executor::add(ValueId local, ValueId other, BufferKind buffer, std::int64_t chunk) {
  if (local == kBadValue || other == kBadValue) return kBadValue;
  if (values_.chunk(local) != values_.chunk(other)) {
    diag_.report([&] {
      return label(current_) + ": adds " + values_.describe(other) + " to " +
             values_.describe(local) + " (at " + chunk_label(buffer, chunk) + ")";
    });
    return kBadValue;
  }
  twice_.clear();
  const ValueId sum = values_.add(local, other, twice_);
  if (sum != kBadValue) return sum;
  diag_.report([&] {
    const std::string whose = is_single(twice_)
                                  ? "rank " + std::to_string(twice_[0].begin) + "'s contribution"
                                  : "the contributions of ranks " + format_ranks(twice_);
    return label(current_) + ": adds " + whose + " to chunk " +
           std::to_string(values_.chunk(local)) + " twice (at " + chunk_label(buffer, chunk) + ")";
  });
  return kBadValue;
}

// In All-Gather every output chunk has one right value and data never changes, so replacing a
// value there with a different one is an error even if a later write repairs it: the chunk
// was wrong for a while, and which write lands last may depend on timing (a race that a single
// symbolic run would not show). Reductions legitimately replace partial sums, and scratch
// buffers are reused freely, so neither is checked.
void Executor::write(BufferKind buffer, std::int64_t chunk, ValueId value) {
  const std::size_t slot = slot_of(buffer, chunk);
  const ValueId old = slots_[slot];
  const BufferSpan& output = layout(rank_)[BufferKind::output];
  const bool in_output =
      slot >= output.base && slot - output.base < static_cast<std::size_t>(output.size);
  if (program_.shape.gathers() && in_output && old > kBadValue && value > kBadValue &&
      !values_.same(old, value))
    diag_.report([&] {
      return label(current_) + ": overwrites " + chunk_label(buffer, chunk) + ", which holds " +
             values_.describe(old) + ", with " + values_.describe(value);
    });
  slots_[slot] = value;
  writers_[slot] = current_;
}

void Executor::receive(std::int32_t connection, std::int32_t count) {
  Mailbox& mailbox = mailboxes_[static_cast<std::size_t>(connection)];
  const Message message = mailbox.messages.front();
  mailbox.messages.pop_front();
  const auto values_end = mailbox.values.begin() + message.count;
  received_.assign(mailbox.values.begin(), values_end);
  mailbox.values.erase(mailbox.values.begin(), values_end);
  if (message.count == count) return;
  diag_.report([&] {
    return label(current_) + ": receives " + plural(count, "chunk") + ", but the matching send " +
           label(message.sender) + " sent " + plural(message.count, "chunk");
  });
  received_.assign(static_cast<std::size_t>(count), kBadValue);
}

void Executor::send(std::int32_t connection, StepId sender, std::int32_t count) {
  Mailbox& mailbox = mailboxes_[static_cast<std::size_t>(connection)];
  mailbox.messages.push_back({sender, count});
  mailbox.values.insert(mailbox.values.end(), results_.begin(), results_.end());
  ++mailbox.sent;
  if (mailbox.waiting == kNoStep) return;
  recv_ready_.push(mailbox.waiting);
  mailbox.waiting = kNoStep;
}

void Executor::add_read_hints() {
  for (const ReadHint& hint : read_hints_) {
    const StepId writer = writers_[hint.slot];
    diag_.append(hint.message,
                 writer == kNoStep || writer == hint.reader
                     ? " (and no other step writes it)"
                     : " (missing dependency on " + label(writer) + ", which writes it?)");
  }
}

// ---- Deadlock -----------------------------------------------------------------------------

// The block a stuck step waits for, when that block is stuck too (kNoBlock when it waits for
// something that can never come). A head's own block predecessor has run, so it waits either
// for a dependency or, with those done, for a message.
BlockId Executor::blocker(StepId head, const std::vector<StepId>& heads) const {
  const StepAt here = at(head);
  for (const StepRef& dep : here.step.deps) {
    const StepId dep_id = program_.step_id(here.block.rank, dep);
    if (!done_[dep_id]) return block_of_[dep_id];
  }
  const Connection& connection =
      program_.connections[static_cast<std::size_t>(here.block.recv_connection)];
  if (connection.sender == kNoBlock ||
      heads[static_cast<std::size_t>(connection.sender)] == kNoStep)
    return kNoBlock;
  return connection.sender;
}

std::string Executor::wait_text(StepId head, const std::vector<StepId>& heads) const {
  const StepAt here = at(head);
  for (const StepRef& dep : here.step.deps) {
    const StepId dep_id = program_.step_id(here.block.rank, dep);
    if (!done_[dep_id]) return label(head) + " waits for " + label(dep_id) + ", which never runs";
  }
  const auto connection_index = static_cast<std::size_t>(here.block.recv_connection);
  const Connection& connection = program_.connections[connection_index];
  const std::string src = std::to_string(connection.src);
  const std::string channel = std::to_string(connection.channel);
  std::string text = label(head) + " waits for a message from rank " + src + " on channel " +
                     channel + " that is never sent";
  if (connection.sender == kNoBlock)
    return text + " (rank " + src + " has no thread block sending to rank " +
           std::to_string(connection.dst) + " on channel " + channel + ")";
  const Block& sender = program_.blocks[static_cast<std::size_t>(connection.sender)];
  const StepId sender_head = heads[static_cast<std::size_t>(connection.sender)];
  if (sender_head == kNoStep)
    return text + " (" + block_label(sender.rank, sender.index) + " finishes after sending " +
           plural(static_cast<std::int64_t>(mailboxes_[connection_index].sent), "message") + ")";
  return text + " (its sender is stuck at " + label(sender_head) + ")";
}

// In the "waits for" graph each stuck block has at most one successor, so a cycle, if any, is
// found by walking from each block once.
std::vector<BlockId> find_cycle(const std::vector<BlockId>& next,
                                const std::vector<StepId>& heads) {
  enum : std::uint8_t { unseen, on_walk, finished };
  std::vector<std::uint8_t> state(next.size(), unseen);
  for (std::size_t start = 0; start < next.size(); ++start) {
    if (heads[start] == kNoStep || state[start] != unseen) continue;
    std::vector<BlockId> walk;
    auto block = static_cast<BlockId>(start);
    while (block != kNoBlock && state[static_cast<std::size_t>(block)] == unseen) {
      state[static_cast<std::size_t>(block)] = on_walk;
      walk.push_back(block);
      block = next[static_cast<std::size_t>(block)];
    }
    if (block != kNoBlock && state[static_cast<std::size_t>(block)] == on_walk)
      return {std::find(walk.begin(), walk.end(), block), walk.end()};
    for (BlockId seen : walk) state[static_cast<std::size_t>(seen)] = finished;
  }
  return {};
}

void Executor::report_deadlock() const {
  const std::size_t stuck_steps = program_.step_count - executed_;
  if (stuck_steps == 0) return;
  // Blocks run their steps in order, so each block's first step not done is the one waiting.
  std::vector<StepId> heads(program_.blocks.size(), kNoStep);
  for (std::size_t b = 0; b < program_.blocks.size(); ++b) {
    const Block& block = program_.blocks[b];
    for (StepId id = block.first; id < block.end() && heads[b] == kNoStep; ++id)
      if (!done_[id]) heads[b] = id;
  }
  std::vector<BlockId> next(program_.blocks.size(), kNoBlock);
  std::vector<BlockId> stuck;
  for (std::size_t b = 0; b < program_.blocks.size(); ++b) {
    if (heads[b] == kNoStep) continue;
    next[b] = blocker(heads[b], heads);
    stuck.push_back(static_cast<BlockId>(b));
  }
  diag_.report([&] {
    const std::vector<BlockId> cycle = find_cycle(next, heads);
    // The causes first: blocks waiting for nothing that is stuck, then a cycle's members.
    std::vector<BlockId> examples;
    std::vector<bool> listed(program_.blocks.size(), false);
    auto list = [&](BlockId b) {
      if (examples.size() == kDeadlockExamples || listed[static_cast<std::size_t>(b)]) return;
      listed[static_cast<std::size_t>(b)] = true;
      examples.push_back(b);
    };
    for (BlockId b : stuck)
      if (next[static_cast<std::size_t>(b)] == kNoBlock) list(b);
    for (BlockId b : cycle) list(b);
    for (BlockId b : stuck) list(b);
    std::string text = "deadlock: " + plural(static_cast<std::int64_t>(stuck_steps), "step") +
                       " in " + plural(static_cast<std::int64_t>(stuck.size()), "thread block") +
                       " cannot run";
    for (BlockId b : examples)
      text += "\n  " + wait_text(heads[static_cast<std::size_t>(b)], heads);
    if (stuck.size() > examples.size())
      text += "\n  ... and " + std::to_string(stuck.size() - examples.size()) + " more waiting";
    if (cycle.empty()) return text;
    text += "\n  cycle:";
    for (std::size_t i = 0; i < cycle.size() && i < kCycleStepsShown; ++i)
      text += " " + label(heads[static_cast<std::size_t>(cycle[i])]) + " ->";
    if (cycle.size() > kCycleStepsShown)
      text += " ... (" + plural(static_cast<std::int64_t>(cycle.size()), "thread block") +
              " in all) ->";
    return text + " " + label(heads[static_cast<std::size_t>(cycle.front())]);
  });
}

// One error per connection: its later leftovers have the same cause as the first.
void Executor::report_unreceived() const {
  for (std::size_t c = 0; c < mailboxes_.size(); ++c) {
    const std::deque<Message>& left = mailboxes_[c].messages;
    if (left.empty()) continue;
    const Connection& connection = program_.connections[c];
    diag_.report([&] {
      const std::string dst = std::to_string(connection.dst);
      const std::string channel = std::to_string(connection.channel);
      std::string text = label(left.front().sender) + ": its message to rank " + dst +
                         " on channel " + channel + " (" + plural(left.front().count, "chunk") +
                         ") is never received";
      if (left.size() > 1)
        text += ", nor are the " + std::to_string(left.size() - 1) + " sent after it";
      if (connection.receiver == kNoBlock)
        text += " (rank " + dst + " has no thread block receiving from rank " +
                std::to_string(connection.src) + " on channel " + channel + ")";
      return text;
    });
  }
}

// ---- Postcondition ------------------------------------------------------------------------

void Executor::check_postcondition() const {
  const Shape& shape = program_.shape;
  for (std::int32_t rank = 0; rank < shape.ranks; ++rank) {
    const BufferSpan& output = layout(rank)[BufferKind::output];
    for (std::int32_t index = 0; index < output.size; ++index) {
      const ValueId value = slots_[output.base + static_cast<std::size_t>(index)];
      if (shape.gathers())
        check_gathered(rank, index, value);
      else if (shape.collective == Collective::reduce_scatter)
        check_reduced(rank, index, rank * shape.slice + index, value);
      else
        check_reduced(rank, index, index, value);
    }
  }
}

void Executor::check_gathered(std::int32_t rank, std::int32_t chunk, ValueId value) const {
  // Messages are built only for the errors that are kept, as there may be a million.
  const std::int32_t owner = chunk / program_.shape.slice;
  auto where = [&] {
    return "rank " + std::to_string(rank) + ": output chunk " + std::to_string(chunk);
  };
  if (value == kNoValue) {
    diag_.report([&] {
      return where() + " is missing (expected the data of rank " + std::to_string(owner) +
             ", chunk " + std::to_string(chunk) + ")";
    });
  } else if (value == kBadValue) {
    diag_.report([&] { return where() + " holds invalid data (see the errors above)"; });
  } else if (values_.chunk(value) != chunk ||
             !std::ranges::equal(values_.ranks(value), std::array{RankRange{owner, owner + 1}})) {
    diag_.report([&] {
      return where() + " holds " + values_.describe(value) + ", expected rank " +
             std::to_string(owner) + "'s chunk " + std::to_string(chunk);
    });
  }
}

void Executor::check_reduced(std::int32_t rank, std::int32_t index, std::int32_t chunk,
                             ValueId value) const {
  const std::int32_t ranks = program_.shape.ranks;
  auto where = [&] {
    return "rank " + std::to_string(rank) + ": output chunk " + std::to_string(index);
  };
  auto expected = [&] { return "the sum over all ranks of chunk " + std::to_string(chunk); };
  if (value == kNoValue) {
    diag_.report([&] { return where() + " is missing (expected " + expected() + ")"; });
  } else if (value == kBadValue) {
    diag_.report([&] { return where() + " holds invalid data (see the errors above)"; });
  } else if (values_.chunk(value) != chunk) {
    diag_.report(
        [&] { return where() + " holds " + values_.describe(value) + ", expected " + expected(); });
  } else if (!std::ranges::equal(values_.ranks(value), std::array{RankRange{0, ranks}})) {
    diag_.report([&] {
      return where() + " sums ranks " + format_ranks(values_.ranks(value)) + ", missing " +
             format_rank_or_ranks(complement(values_.ranks(value), ranks));
    });
  }
}

}  // namespace

std::string VerifyResult::summary() const {
  std::string text;
  for (const std::string& error : errors) {
    if (!text.empty()) text += '\n';
    text += error;
  }
  if (error_count > errors.size())
    text += "\n... and " + std::to_string(error_count - errors.size()) + " more";
  return text;
}

VerifyResult verify_schedule(const Schedule& schedule, const Topology* topology) {
  VerifyResult result;
  Diagnostics diagnostics(result);
  Program program;
  if (!StructureChecker(schedule, topology, diagnostics, program).run()) return result;
  Executor executor(program, diagnostics);
  result.steps_executed = executor.run();
  executor.report_deadlock();
  executor.report_unreceived();
  executor.check_postcondition();
  return result;
}

}  // namespace optiflow::core
