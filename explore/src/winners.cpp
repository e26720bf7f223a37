// Measured times compete with measured ones only: once a size has a measured winner, only a
// faster measurement replaces it.
#include "winners.hpp"

#include <algorithm>
#include <filesystem>

#include "optiflow/schedule/msccl_xml.hpp"
#include "optiflow/schedule/schedule_io.hpp"
#include "optiflow/sim/simulator.hpp"
#include "optiflow/support/text_file.hpp"

namespace optiflow::explore {

Winners::Winners(const Reference& reference)
    : reference_(reference), best_(reference.sizes.size()) {}

bool Winners::beats(std::size_t s, const Candidate& c, const std::vector<double>* hw) const {
  const Best& best = best_[s];
  if (hw) return best.measured_us == 0 || (*hw)[s] < best.measured_us;
  return best.measured_us == 0 &&
         (best.simulated.time_us == 0 || c.simulated.results[s].time_us < best.simulated.time_us);
}

bool Winners::improves_some_size(const Candidate& c, const std::vector<double>* hw) const {
  for (std::size_t s = 0; s < best_.size(); ++s)
    if (beats(s, c, hw)) return true;
  return false;
}

std::vector<double> Winners::simulated_times() const {
  std::vector<double> times;
  for (const Best& best : best_) times.push_back(best.simulated.time_us);
  return times;
}

void Winners::record(Candidate& c, std::int64_t program_id, const propose::Parent& parent,
                     const std::vector<double>* hw) {
  std::shared_ptr<const schedule::Schedule> kept;
  for (std::size_t s = 0; s < best_.size(); ++s)
    if (beats(s, c, hw)) {
      if (!kept) kept = std::make_shared<const schedule::Schedule>(std::move(c.compiled.schedule));
      best_[s] = Best{c.simulated.results[s], program_id, parent, kept, hw ? (*hw)[s] : 0.0, {}};
    }
}

void Winners::offer_baseline(const std::string& name,
                             std::shared_ptr<const schedule::Schedule> schedule,
                             const std::vector<support::SizeResult>& results) {
  for (std::size_t s = 0; s < best_.size(); ++s) {
    const Best& best = best_[s];
    if (results[s].time_us == 0) continue;
    if (best.simulated.time_us != 0 && results[s].time_us >= best.simulated.time_us) continue;
    best_[s] = Best{results[s], 0, propose::Parent{}, schedule, 0.0, name};
    best_[s].simulated.bound_us = reference_.bound_us[s];
  }
}

std::vector<propose::Parent> Winners::best_programs() const {
  std::vector<propose::Parent> best;
  std::vector<std::int64_t> ids;
  for (std::size_t s : {std::size_t{0}, best_.size() / 2, best_.size() - 1}) {
    if (s >= best_.size() || best_[s].program_id == 0) continue;  // none yet, or a baseline
    if (std::find(ids.begin(), ids.end(), best_[s].program_id) != ids.end()) continue;
    ids.push_back(best_[s].program_id);
    best.push_back(best_[s].parent);
  }
  return best;
}

void Winners::fill(Progress& progress) const {
  for (const Best& best : best_) {
    progress.best_busbw_GBps.push_back(best.simulated.busbw_GBps);
    progress.best_bound_ratio.push_back(best.simulated.x_bound());
  }
}

std::vector<SizeWinner> Winners::write(const std::string& out_dir,
                                       const topology::Topology& topology,
                                       support::Collective collective) const {
  std::filesystem::create_directories(out_dir);
  std::vector<SizeWinner> winners;
  for (std::size_t s = 0; s < best_.size(); ++s) {
    if (best_[s].simulated.time_us == 0) continue;
    SizeWinner w = winner_at(s);
    const schedule::Schedule& schedule = *best_[s].schedule;
    const std::string stem = out_dir + "/" + std::string(support::to_string(collective)) + "-" +
                             topology.name() + "-" + std::to_string(w.simulated.size_bytes);
    w.schedule_path = stem + ".json";
    w.msccl_path = stem + ".xml";
    support::write_text_file(w.schedule_path, schedule::write_schedule_json(schedule));
    schedule::MscclExportOptions xml;  // each file covers the sizes down to the previous one
    xml.min_bytes = s == 0 ? 0 : reference_.sizes[s - 1] + 1;
    xml.max_bytes = w.simulated.size_bytes;
    support::write_text_file(w.msccl_path, schedule::write_msccl_xml(schedule, xml));
    sim::SimOptions flow;
    flow.model = sim::Model::flow;
    w.flow_busbw_GBps =
        sim::Simulator(topology, schedule, flow).run(w.simulated.size_bytes).busbw_GBps;
    winners.push_back(std::move(w));
  }
  return winners;
}

SizeWinner Winners::winner_at(std::size_t s) const {
  SizeWinner w;
  w.simulated = best_[s].simulated;
  w.program_id = best_[s].program_id;
  w.program_source = best_[s].parent.source;
  w.baseline = best_[s].baseline;
  w.measured_time_us = best_[s].measured_us;
  if (!reference_.nccl.empty()) w.nccl = reference_.nccl[s];
  return w;
}

}  // namespace optiflow::explore
