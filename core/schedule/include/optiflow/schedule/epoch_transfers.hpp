// Epoch-numbered chunk transfers (what TE-CCL's solver outputs, and what the teccl baseline
// synthesizes) into the schedule IR: one thread block per peer and direction, each forward
// after the receive it depends on.
#pragma once

#include <map>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "optiflow/schedule/schedule.hpp"
#include "optiflow/topology/topology.hpp"

namespace optiflow::schedule {

/// One GPU-to-GPU transfer of one chunk, leaving its sender in `epoch`, along `route` (its
/// links, through switches where it has more than one). In-place All-Gather numbering: rank r
/// owns chunks [r * chunks_per_rank, (r + 1) * chunks_per_rank).
struct EpochTransfer {
  int sender = 0, receiver = 0;  ///< ranks
  int chunk = 0;
  int epoch = 0;
  std::vector<topology::LinkId> route;
};

/// Builds an in-place All-Gather from transfers added in epoch order. A rank forwards a chunk
/// only in an epoch after the one its copy was sent in; every rank receives each chunk it
/// does not own exactly once.
class EpochScheduleBuilder {
 public:
  EpochScheduleBuilder(std::string name, std::string topology, int ranks, int chunks_per_rank);

  /// Adds the transfer; returns what is wrong with it, if anything (nothing is added then).
  std::optional<std::string> add(const EpochTransfer& transfer);
  /// The first (rank, chunk) that never arrives, if any.
  std::optional<std::pair<int, int>> missing() const;
  Schedule take() { return std::move(schedule_); }

 private:
  struct Held {
    int epoch = 0;
    StepRef step;
  };
  std::int32_t block(int rank, int peer, bool sends);
  StepRef append(int rank, std::int32_t tb, StepKind kind, int chunk, std::vector<StepRef> deps,
                 const std::vector<topology::LinkId>& route);

  Schedule schedule_;
  int chunks_per_rank_;
  std::vector<std::map<std::pair<int, bool>, std::size_t>> tb_of_;
  std::vector<std::map<int, Held>> held_;
};

}  // namespace optiflow::schedule
