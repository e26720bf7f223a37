// The verifier's structural checks (docs/schedule-ir.md, "Verification", step 1): run before
// anything executes, because malformed input must not crash the analysis.
#include <map>
#include <tuple>

#include "verifier_model.hpp"

namespace optiflow::schedule::verifier_detail {
namespace {

class StructureChecker {
 public:
  StructureChecker(const Schedule& schedule, const topology::Topology* topology,
                   Diagnostics& diagnostics, BufferLayout& layout)
      : schedule_(schedule), topology_(topology), diag_(diagnostics), layout_(layout) {}

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
    const support::Collective collective = schedule_.collective;
    const std::int32_t ranks = schedule_.ranks;
    const std::int32_t chunks = schedule_.chunks;
    if (collective != support::Collective::all_gather &&
        collective != support::Collective::reduce_scatter &&
        collective != support::Collective::all_reduce)
      error("verifying " + std::string(to_string(collective)) +
            " schedules is not supported (only allgather, reducescatter and allreduce)");
    if (ranks < 1)
      error("the schedule has " + plural(ranks, "rank") + "; it needs at least 1");
    else if (schedule_.programs.size() != static_cast<std::size_t>(ranks))
      error("the schedule has " + plural(ranks, "rank") + " but " +
            plural(static_cast<std::int64_t>(schedule_.programs.size()), "rank program"));
    if (chunks < 1)
      error("chunks is " + std::to_string(chunks) + "; it must be positive");
    else if (ranks >= 1 && collective != support::Collective::all_reduce && chunks % ranks != 0)
      error("chunks (" + std::to_string(chunks) + ") is not a multiple of the rank count (" +
            std::to_string(ranks) + "), as " + std::string(to_string(collective)) + " requires");
    if (diag_.count() != errors_before) return false;
    layout_.shape = Shape{collective, ranks, chunks, chunks / ranks, schedule_.inplace};
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
    connection_ends_.clear();
    for (std::size_t tb = 0; tb < program.tbs.size(); ++tb)
      check_block(rank, static_cast<std::int32_t>(tb), program.tbs[tb]);
    for (std::size_t tb = 0; tb < program.tbs.size(); ++tb)
      for (std::size_t step = 0; step < program.tbs[tb].steps.size(); ++step)
        check_step(rank, static_cast<std::int32_t>(tb), static_cast<std::int32_t>(step));
  }

  void check_buffers(std::int32_t rank, const RankProgram& program) {
    const Shape& shape = layout_.shape;
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
    layout_.ranks.push_back(layout(rank, program));
  }

  // The buffers' slots, with the in-place aliasing of docs/schedule-ir.md.
  RankLayout layout(std::int32_t rank, const RankProgram& program) {
    const Shape& shape = layout_.shape;
    auto size = [&](BufferKind kind, std::int32_t declared) {
      return shape.aliased(kind) ? shape.buffer_chunks(kind) : std::max(declared, 0);
    };
    const std::int32_t input = size(BufferKind::input, program.input_chunks);
    const std::int32_t output = size(BufferKind::output, program.output_chunks);
    const auto own_slice = static_cast<std::size_t>(rank) * static_cast<std::size_t>(shape.slice);
    std::size_t& next = layout_.slot_count;
    RankLayout layout;
    if (shape.inplace && shape.gathers()) {
      layout[BufferKind::output] = {next, output};
      layout[BufferKind::input] = {next + own_slice, input};
      next += static_cast<std::size_t>(output);
    } else if (shape.inplace && shape.collective == support::Collective::reduce_scatter) {
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

  void check_block(std::int32_t rank, std::int32_t index, const ThreadBlock& tb) {
    const std::string where = block_label(rank, index) + ": ";
    if (tb.channel < 0) error(where + "channel " + std::to_string(tb.channel) + " is negative");
    if (check_peer(rank, where, tb.send_peer, "send"))
      check_connection_end(index, tb.send_peer, tb.channel, true, where);
    if (check_peer(rank, where, tb.recv_peer, "receive"))
      check_connection_end(index, tb.recv_peer, tb.channel, false, where);
    step_count_ += tb.steps.size();
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

  // A connection (sender, receiver, channel) is a FIFO between two blocks: one at each end.
  void check_connection_end(std::int32_t index, std::int32_t peer, std::int32_t channel,
                            bool sending, const std::string& where) {
    const auto [it, inserted] = connection_ends_.try_emplace({peer, channel, sending}, index);
    if (inserted) return;
    error(where +
          (sending ? "sends to rank " + std::to_string(peer)
                   : "receives from rank " + std::to_string(peer)) +
          " on channel " + std::to_string(channel) + ", as tb " + std::to_string(it->second) +
          " does already");
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
    if (uses.reads_src) check_operand(place, "src", step.src_buf, step.src_off);
    if (uses.uses_dst()) check_operand(place, "dst", step.dst_buf, step.dst_off);
    if (step.count > 0)
      accesses_ += static_cast<std::size_t>(step.count) *
                   static_cast<std::size_t>(uses.reads_src + uses.reads_dst + uses.writes_dst);
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
    const BufferSpan& span = layout_.ranks[static_cast<std::size_t>(place.rank)][buffer];
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
    const topology::Topology& topology = *topology_;
    for (topology::LinkId id : step.route) {
      if (id >= topology.link_count()) {
        error(place.where() + "route link " + std::to_string(id) + " does not exist (topology '" +
              topology.name() + "' has " +
              plural(static_cast<std::int64_t>(topology.link_count()), "link") + ")");
        return;
      }
    }
    const topology::NodeId from = topology.gpu_of_rank(rank);
    const topology::NodeId to = topology.gpu_of_rank(peer);
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
    if (layout_.slot_count > kMaxSlots)
      error("the buffers of all ranks hold " +
            plural(static_cast<std::int64_t>(layout_.slot_count), "chunk") +
            ", more than the verifier's limit of " + std::to_string(kMaxSlots));
    if (step_count_ > kMaxSteps)
      error("the schedule has " + plural(static_cast<std::int64_t>(step_count_), "step") +
            ", more than the verifier's limit of " + std::to_string(kMaxSteps));
    if (accesses_ > kMaxAccesses)
      error("the schedule reads and writes " +
            plural(static_cast<std::int64_t>(accesses_), "chunk") +
            " in all, more than the verifier's limit of " + std::to_string(kMaxAccesses));
  }

  const Schedule& schedule_;
  const topology::Topology* topology_;
  Diagnostics& diag_;
  BufferLayout& layout_;
  bool routes_checkable_ = false;
  std::size_t step_count_ = 0;
  std::size_t accesses_ = 0;  // chunks read or written, summed over steps
  // Of the rank under check: (peer, channel, sending) -> the block at that end.
  std::map<std::tuple<std::int32_t, std::int32_t, bool>, std::int32_t> connection_ends_;
};

}  // namespace

bool check_structure(const Schedule& schedule, const topology::Topology* topology,
                     Diagnostics& diagnostics, BufferLayout& layout) {
  return StructureChecker(schedule, topology, diagnostics, layout).run();
}

}  // namespace optiflow::schedule::verifier_detail
