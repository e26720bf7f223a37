// MSCCL's instances: the schedule run n times side by side, each copy on channels of its own
// and on 1/n of every chunk, so that more thread blocks (and connections) move the same data.
#include <algorithm>
#include <stdexcept>
#include <vector>

#include "optiflow/schedule/schedule.hpp"

namespace optiflow::schedule {
namespace {

// How many rank-owned regions a buffer has: the All-Gather output and the Reduce-Scatter input
// are cut into one slice per rank, and a copy's sub-chunks of a slice must stay in that slice.
int regions_of(const Schedule& schedule, BufferKind buffer) {
  const bool sliced =
      (schedule.collective == support::Collective::all_gather && buffer == BufferKind::output) ||
      (schedule.collective == support::Collective::reduce_scatter && buffer == BufferKind::input);
  return sliced ? schedule.ranks : 1;
}

std::int32_t buffer_chunks(const RankProgram& program, BufferKind buffer) {
  switch (buffer) {
    case BufferKind::input:
      return program.input_chunks;
    case BufferKind::output:
      return program.output_chunks;
    case BufferKind::scratch:
      return program.scratch_chunks;
  }
  return 0;
}

bool uses_src(StepKind kind) {
  return kind == StepKind::send || kind == StepKind::copy || step_reduces(kind);
}
bool uses_dst(StepKind kind) {
  return kind != StepKind::nop && kind != StepKind::send && kind != StepKind::recv_reduce_send;
}

class Replicator {
 public:
  Replicator(const Schedule& schedule, int instances)
      : schedule_(schedule), instances_(instances) {}

  Schedule run() {
    Schedule out = schedule_;
    out.name = schedule_.name + " x" + std::to_string(instances_) + " instances";
    out.chunks = schedule_.chunks * instances_;
    for (std::size_t r = 0; r < schedule_.programs.size(); ++r)
      out.programs[r] = replicate(schedule_.programs[r]);
    return out;
  }

 private:
  // Chunk `c` of a buffer of `size` chunks in `regions` slices, as copy `i` sees it: sub-chunk
  // i of c, placed so that each copy's part of a slice is contiguous within the slice.
  std::int32_t place(const RankProgram& program, BufferKind buffer, std::int32_t c, int i) const {
    const std::int32_t region = buffer_chunks(program, buffer) / regions_of(schedule_, buffer);
    if (region <= 0) return c;  // not a buffer this rank has: the verifier will say so
    return (c / region) * region * instances_ + i * region + c % region;
  }

  // Where a step must be cut so that every piece lies in one slice of each buffer it touches.
  std::vector<std::int32_t> cuts(const RankProgram& program, const Step& step) const {
    std::vector<std::int32_t> at{0, step.count};
    auto add = [&](BufferKind buffer, std::int32_t offset) {
      const int regions = regions_of(schedule_, buffer);
      if (regions == 1) return;
      const std::int32_t region = buffer_chunks(program, buffer) / regions;
      if (region <= 0) return;
      for (std::int32_t c = (offset / region + 1) * region; c < offset + step.count; c += region)
        at.push_back(c - offset);
    };
    if (uses_src(step.kind)) add(step.src_buf, step.src_off);
    if (uses_dst(step.kind)) add(step.dst_buf, step.dst_off);
    std::sort(at.begin(), at.end());
    at.erase(std::unique(at.begin(), at.end()), at.end());
    return at;
  }

  RankProgram replicate(const RankProgram& program) const {
    const auto blocks = static_cast<std::int32_t>(program.tbs.size());
    std::int32_t channels = 0;
    for (const ThreadBlock& tb : program.tbs) channels = std::max(channels, tb.channel + 1);
    // A dependency on step s waits for the last piece s was cut into.
    std::vector<std::vector<std::int32_t>> last_piece(program.tbs.size());
    std::vector<std::vector<std::vector<std::int32_t>>> cuts_of(program.tbs.size());
    for (std::size_t b = 0; b < program.tbs.size(); ++b) {
      std::int32_t pieces = 0;
      for (const Step& step : program.tbs[b].steps) {
        cuts_of[b].push_back(step.count > 1 ? cuts(program, step)
                                            : std::vector<std::int32_t>{0, step.count});
        pieces += static_cast<std::int32_t>(cuts_of[b].back().size()) - 1;
        last_piece[b].push_back(pieces - 1);
      }
    }
    RankProgram out = program;
    out.input_chunks *= instances_;
    out.output_chunks *= instances_;
    out.scratch_chunks *= instances_;
    out.tbs.clear();
    for (int i = 0; i < instances_; ++i)
      for (std::size_t b = 0; b < program.tbs.size(); ++b) {
        ThreadBlock tb = program.tbs[b];
        tb.channel += i * channels;
        tb.steps.clear();
        for (std::size_t s = 0; s < program.tbs[b].steps.size(); ++s) {
          const Step& step = program.tbs[b].steps[s];
          const std::vector<std::int32_t>& at = cuts_of[b][s];
          for (std::size_t p = 0; p + 1 < at.size(); ++p) {
            Step piece = step;
            piece.count = at[p + 1] - at[p];
            if (uses_src(step.kind))
              piece.src_off = place(program, step.src_buf, step.src_off + at[p], i);
            if (uses_dst(step.kind))
              piece.dst_off = place(program, step.dst_buf, step.dst_off + at[p], i);
            piece.deps.clear();
            if (p == 0)
              for (const StepRef& dep : step.deps)
                piece.deps.push_back({i * blocks + dep.tb,
                                      last_piece[static_cast<std::size_t>(dep.tb)]
                                                [static_cast<std::size_t>(dep.step)]});
            tb.steps.push_back(std::move(piece));
          }
        }
        out.tbs.push_back(std::move(tb));
      }
    return out;
  }

  const Schedule& schedule_;
  int instances_;
};

}  // namespace

Schedule replicate_instances(const Schedule& schedule, int instances) {
  if (instances < 1) throw std::invalid_argument("replicate_instances: instances must be >= 1");
  if (instances == 1) return schedule;
  return Replicator(schedule, instances).run();
}

}  // namespace optiflow::schedule
