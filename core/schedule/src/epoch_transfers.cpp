#include "optiflow/schedule/epoch_transfers.hpp"

namespace optiflow::schedule {

EpochScheduleBuilder::EpochScheduleBuilder(std::string name, std::string topology, int ranks,
                                           int chunks_per_rank)
    : chunks_per_rank_(chunks_per_rank),
      tb_of_(static_cast<std::size_t>(ranks)),
      held_(static_cast<std::size_t>(ranks)) {
  schedule_.name = std::move(name);
  schedule_.collective = support::Collective::all_gather;
  schedule_.ranks = ranks;
  schedule_.chunks = ranks * chunks_per_rank;
  schedule_.protocol = "Simple";
  schedule_.inplace = true;
  schedule_.topology = std::move(topology);
  schedule_.programs.resize(static_cast<std::size_t>(ranks));
  for (auto& program : schedule_.programs) program.output_chunks = schedule_.chunks;
}

std::optional<std::string> EpochScheduleBuilder::add(const EpochTransfer& t) {
  const auto& sender_held = held_[static_cast<std::size_t>(t.sender)];
  const auto got = sender_held.find(t.chunk);
  const bool owner = t.chunk / chunks_per_rank_ == t.sender;
  if (!owner && (got == sender_held.end() || got->second.epoch >= t.epoch))
    return "rank " + std::to_string(t.sender) + " forwards chunk " + std::to_string(t.chunk) +
           " in epoch " + std::to_string(t.epoch) + " before it has received it";
  auto& receiver_held = held_[static_cast<std::size_t>(t.receiver)];
  if (t.chunk / chunks_per_rank_ == t.receiver || receiver_held.contains(t.chunk))
    return "rank " + std::to_string(t.receiver) + " receives chunk " + std::to_string(t.chunk) +
           " it already holds";
  std::vector<StepRef> deps;
  if (!owner) deps.push_back(got->second.step);
  append(t.sender, block(t.sender, t.receiver, true), StepKind::send, t.chunk, std::move(deps),
         t.route);
  const StepRef recv =
      append(t.receiver, block(t.receiver, t.sender, false), StepKind::recv, t.chunk, {}, {});
  receiver_held[t.chunk] = {t.epoch, recv};
  return std::nullopt;
}

std::optional<std::pair<int, int>> EpochScheduleBuilder::missing() const {
  for (int r = 0; r < schedule_.ranks; ++r)
    for (int c = 0; c < schedule_.chunks; ++c)
      if (c / chunks_per_rank_ != r && !held_[static_cast<std::size_t>(r)].contains(c))
        return std::pair{r, c};
  return std::nullopt;
}

std::int32_t EpochScheduleBuilder::block(int rank, int peer, bool sends) {
  auto& tbs = schedule_.programs[static_cast<std::size_t>(rank)].tbs;
  const auto [it, fresh] =
      tb_of_[static_cast<std::size_t>(rank)].try_emplace({peer, sends}, tbs.size());
  if (fresh) {
    ThreadBlock tb;
    (sends ? tb.send_peer : tb.recv_peer) = peer;
    tbs.push_back(std::move(tb));
  }
  return static_cast<std::int32_t>(it->second);
}

StepRef EpochScheduleBuilder::append(int rank, std::int32_t tb, StepKind kind, int chunk,
                                     std::vector<StepRef> deps,
                                     const std::vector<topology::LinkId>& route) {
  Step step;
  step.kind = kind;
  step.src_off = chunk;
  step.dst_off = chunk;
  step.count = 1;
  step.deps = std::move(deps);
  step.route = route;
  auto& steps =
      schedule_.programs[static_cast<std::size_t>(rank)].tbs[static_cast<std::size_t>(tb)].steps;
  steps.push_back(std::move(step));
  return {tb, static_cast<std::int32_t>(steps.size() - 1)};
}

}  // namespace optiflow::schedule
