// What a run stores: its options (enough to resume it), and every candidate with its program,
// compilation and simulations.
#include "run_record.hpp"

#include <unistd.h>

#include <nlohmann/json.hpp>

#include "optiflow/schedule/schedule_io.hpp"
#include "optiflow/support/error.hpp"
#include "optiflow/topology/topology_io.hpp"

#ifndef OPTIFLOW_GIT_REVISION
#define OPTIFLOW_GIT_REVISION "unknown"
#endif

namespace optiflow::explore {
namespace {

std::string hostname() {
  char name[256] = {};
  return gethostname(name, sizeof name - 1) == 0 ? name : "unknown";
}

bool measuring(const ExploreOptions& options) {
  return options.measure && options.hw_topk > 0;
}

db::RunInfo run_info(const ExploreOptions& options, const topology::Topology& topology,
                     std::int64_t topology_id) {
  db::RunInfo info;
  info.topology_id = topology_id;
  info.topology_name = topology.name();
  info.collective = std::string(support::to_string(options.collective));
  info.sizes = options.sizes;
  info.proposer = options.proposer;
  info.seed = options.seed;
  info.budget = options.budget;
  info.host = hostname();
  info.git_revision = OPTIFLOW_GIT_REVISION;
  nlohmann::json saved{{"topology", options.topology},
                       {"time_limit_s", options.time_limit_s},
                       {"floor", options.floor.value()},  // the exploration resolved the default
                       {"floor_time_limit_s", options.floor_time_limit_s}};
  if (measuring(options)) {
    saved["hw_backend"] = options.hw_backend;
    saved["hw_topk"] = options.hw_topk;
  }
  info.options_json = saved.dump();
  return info;
}

}  // namespace

RunRecord::RunRecord(ExploreOptions& options)
    : store_(db::Store::open(options.db_path)), db_path_(options.db_path) {
  if (options.resume) resume(options);
}

void RunRecord::resume(ExploreOptions& options) {
  const auto info = store_.run(*options.resume);
  if (!info)
    throw support::OptionError(
        "resume", "no run " + std::to_string(*options.resume) + " in this database", db_path_);
  const auto saved = nlohmann::json::parse(info->options_json);
  options.topology = saved.at("topology").get<std::string>();
  options.collective = *support::collective_from_string(info->collective);
  options.sizes = info->sizes;
  options.budget = info->budget;
  options.seed = info->seed;
  options.proposer = info->proposer;
  if (saved.contains("floor")) options.floor = saved.at("floor").get<std::vector<std::string>>();
  if (saved.contains("floor_time_limit_s"))
    options.floor_time_limit_s = saved.at("floor_time_limit_s").get<double>();
  run_id_ = info->id;
  committed_ = store_.candidates(run_id_);
}

void RunRecord::begin(const ExploreOptions& options, const topology::Topology& topology) {
  const std::int64_t topology_id =
      store_.put_topology(topology.name(), topology::write_topology_json(topology));
  if (!options.resume)
    run_id_ = store_.begin_run(run_info(options, topology, topology_id));
  else
    store_.set_run_status(run_id_, "running");
}

std::int64_t RunRecord::commit(const Candidate& c, support::Collective collective,
                               bool keep_schedule) {
  if (static_cast<std::size_t>(c.seq) < committed_.size()) return check_committed(c);
  db::CandidateRecord r;
  r.run_id = run_id_;
  r.seq = c.seq;
  r.iteration = c.iteration;
  r.island = c.island;
  r.program_source = c.stored_source();
  r.origin = c.origin;
  r.model_call_id = c.model_call_id;
  r.parent_program_ids = c.parent_ids;
  r.collective = std::string(support::to_string(collective));
  r.compiled = c.ok();
  r.diagnostics = c.diagnostics();
  r.compile_ms = c.compiled.compile_ms;
  if (c.ok()) {
    r.schedule_hash = c.compiled.schedule_hash;
    if (keep_schedule) r.schedule_json = schedule::write_schedule_json(c.compiled.schedule);
    r.schedule_chunks = c.compiled.chunks;
    r.schedule_steps = c.compiled.steps;
    r.sims = c.simulated.results;
  }
  return store_.record_candidate(r);
}

// A resumed run must reproduce what it committed: the same program at the same seq.
std::int64_t RunRecord::check_committed(const Candidate& c) const {
  const db::StoredCandidate& stored = committed_[static_cast<std::size_t>(c.seq)];
  if (stored.program_source != c.stored_source())
    throw support::OptionError("resume",
                               "run " + std::to_string(run_id_) + " cannot be resumed: candidate " +
                                   std::to_string(c.seq) +
                                   " is no longer reproduced (the code changed?)",
                               db_path_);
  return stored.program_id;
}

void RunRecord::end(const std::string& status) {
  store_.set_run_status(run_id_, status);
}

}  // namespace optiflow::explore
