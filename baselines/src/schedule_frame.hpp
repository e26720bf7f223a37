// What every baseline schedule is built from: a frame in place, as the compiler emits it, and
// steps that each move one chunk.
#pragma once

#include <string>
#include <utility>
#include <vector>

#include "optiflow/schedule/schedule.hpp"

namespace optiflow::baselines {

/// An in-place schedule of `chunks` chunks on `ranks` ranks with no steps yet: All-Gather and
/// All-Reduce in the output buffer, Reduce-Scatter in its input (its own slice the result).
inline schedule::Schedule schedule_frame(std::string name, support::Collective collective,
                                         int ranks, int chunks, const std::string& topology) {
  schedule::Schedule s;
  s.name = std::move(name);
  s.collective = collective;
  s.ranks = ranks;
  s.chunks = chunks;
  s.inplace = true;
  s.topology = topology;
  s.programs.resize(static_cast<std::size_t>(ranks));
  for (auto& program : s.programs) {
    program.input_chunks = collective == support::Collective::all_gather ? 0 : chunks;
    program.output_chunks =
        collective == support::Collective::reduce_scatter ? chunks / ranks : chunks;
  }
  return s;
}

/// The buffer a frame's steps work in.
inline schedule::BufferKind frame_buffer(support::Collective collective) {
  return collective == support::Collective::reduce_scatter ? schedule::BufferKind::input
                                                           : schedule::BufferKind::output;
}

/// A step moving chunk `chunk` of `buffer` in place, after `deps`; `route` for steps that send.
inline schedule::Step chunk_step(schedule::StepKind kind, schedule::BufferKind buffer, int chunk,
                                 std::vector<schedule::StepRef> deps = {},
                                 const std::vector<topology::LinkId>& route = {}) {
  schedule::Step s;
  s.kind = kind;
  s.src_buf = buffer;
  s.dst_buf = buffer;
  s.src_off = chunk;
  s.dst_off = chunk;
  s.count = 1;
  s.deps = std::move(deps);
  if (schedule::step_sends(kind)) s.route = route;
  return s;
}

}  // namespace optiflow::baselines
