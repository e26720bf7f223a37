// The exploration loop (docs/explore.md). Proposals are made and committed in sequence
// order; only compilation and simulation run in parallel, so the same seed gives the same
// run whatever the thread count.
#include "optiflow/explore/explore.hpp"

#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <deque>
#include <filesystem>
#include <fstream>
#include <iostream>
#include <map>
#include <memory>
#include <nlohmann/json.hpp>
#include <optional>
#include <random>
#include <set>
#include <stdexcept>

#include "evaluator.hpp"
#include "optiflow/baselines/baseline.hpp"
#include "optiflow/db/store.hpp"
#include "optiflow/schedule/msccl_xml.hpp"
#include "optiflow/schedule/schedule_io.hpp"
#include "optiflow/sim/simulator.hpp"
#include "optiflow/support/error.hpp"
#include "optiflow/support/parallel.hpp"
#include "optiflow/support/sizes.hpp"
#include "optiflow/support/text_file.hpp"
#include "optiflow/topology/bounds.hpp"
#include "optiflow/topology/topology_io.hpp"
#include "program_database.hpp"

#ifndef OPTIFLOW_GIT_REVISION
#define OPTIFLOW_GIT_REVISION "unknown"
#endif

namespace optiflow::explore {
namespace {

constexpr std::size_t kBatch =
    16;  // proposals per iteration (fixed: results must not depend on cores)
constexpr std::size_t kIslands = 4;
constexpr std::size_t kPerIsland = 8;
constexpr std::int64_t kMigrateEvery = 4;  // iterations

using Clock = std::chrono::steady_clock;

std::uint64_t mix(std::uint64_t x) {  // splitmix64: independent seeds per proposal
  x += 0x9e3779b97f4a7c15ULL;
  x = (x ^ (x >> 30)) * 0xbf58476d1ce4e5b9ULL;
  x = (x ^ (x >> 27)) * 0x94d049bb133111ebULL;
  return x ^ (x >> 31);
}

std::string hostname() {
  char name[256] = {};
  return gethostname(name, sizeof name - 1) == 0 ? name : "unknown";
}

// The NCCL baseline's row for a size (its rows are by ascending size, without repeats).
std::size_t nccl_row(const baselines::BaselineRun& nccl, std::uint64_t size_bytes) {
  for (std::size_t i = 0; i < nccl.rows.size(); ++i)
    if (nccl.rows[i].size_bytes == size_bytes) return i;
  throw std::logic_error("the NCCL baseline has no row for a size explore ran");
}

std::string baseline_program(const topology::Topology& topo) {
  int hosts = 0, per_host = 0;
  for (topology::NodeId gpu : topo.gpus_by_rank()) {
    hosts = std::max(hosts, topo.node(gpu).host + 1);
    per_host = std::max(per_host, topo.node(gpu).local + 1);
  }
  if (hosts > 1 && per_host > 1)
    return "split nlocal as r {\n  ring over all by (host, (local - r) % nlocal)\n}\n";
  return "ring over all\n";
}

// One proposal and, once evaluated, its results.
struct Candidate {
  std::int64_t seq = 0, iteration = 0;
  int island = -1;  // -1: a template, offered to every island
  std::string source, origin;
  std::int64_t model_call_id = 0;
  bool repaired = false;  // its proposer has had its second try
  Parsed parsed;          // its tree is dropped once compiled
  std::vector<std::int64_t> parent_ids;
  Compiled compiled;
  Simulated simulated;
  bool reused = false;  // same program as an earlier candidate of this run

  // What is stored: the canonical text, or the proposal as written when it does not parse.
  const std::string& stored_source() const {
    return parsed.canonical.empty() ? source : parsed.canonical;
  }
  const std::string& diagnostics() const {
    return parsed.canonical.empty() ? parsed.diagnostics : compiled.diagnostics;
  }
  bool ok() const { return !parsed.canonical.empty() && compiled.ok; }

  static Candidate of(propose::Proposal&& p) {
    Candidate c;
    c.source = std::move(p.source);
    c.origin = std::move(p.origin);
    c.model_call_id = p.model_call_id;
    return c;
  }
};

constexpr std::size_t kKnownShown = 12;    // programs a request lists as already evaluated
constexpr std::size_t kFailuresShown = 3;  // recent failures a request carries
constexpr int kMaxEmptyRounds = 5;         // rounds without a single proposal before the run ends

class Exploration {
 public:
  Exploration(const ExploreOptions& options, const propose::ProposerFactory& make_proposer,
              const ProgressSink& progress)
      : options_(options),
        make_proposer_(make_proposer),
        progress_(progress),
        store_(db::Store::open(options.db_path)),
        start_(Clock::now()) {}

  ExploreResult run() {
    open_run();
    rng_.seed(options_.seed);
    std::int64_t seq = 0, iteration = 0;
    until_proposer_fails([&] {
      for (propose::Proposal& p : proposer_->initial_programs())
        pending_.push_back(Candidate::of(std::move(p)));
    });
    while (seq < options_.budget && !out_of_time() && failure_.empty()) {
      std::vector<Candidate> batch;
      until_proposer_fails([&] {
        while (batch.size() < kBatch && seq < options_.budget) {
          if (pending_.empty() && !request_proposals(seq, kBatch - batch.size())) break;
          if (pending_.empty()) continue;
          Candidate c = std::move(pending_.front());
          pending_.pop_front();
          c.seq = seq++;
          c.iteration = iteration;
          batch.push_back(std::move(c));
        }
      });
      if (batch.empty()) break;
      evaluate(batch);
      until_proposer_fails([&] { repair(batch); });
      measure(batch);
      for (Candidate& c : batch) commit(c);
      if (++iteration % kMigrateEvery == 0) population_.migrate();
      report();
      if (options_.should_stop && options_.should_stop()) break;
    }
    store_.set_run_status(run_id_, !failure_.empty() ? "failed"
                                   : seq >= options_.budget || !stop_reason_.empty()
                                       ? "finished"
                                       : "interrupted");
    return finish(seq);
  }

 private:
  void open_run() {
    if (options_.resume) {
      const auto info = store_.run(*options_.resume);
      if (!info)
        throw support::InputError(
            support::SourceLocation{options_.db_path, 0, 0, "--resume"},
            "no run " + std::to_string(*options_.resume) + " in this database");
      const auto saved = nlohmann::json::parse(info->options_json);
      options_.topology = saved.at("topology").get<std::string>();
      options_.collective = *support::collective_from_string(info->collective);
      options_.sizes = info->sizes;
      options_.budget = info->budget;
      options_.seed = info->seed;
      options_.proposer = info->proposer;
      run_id_ = info->id;
      committed_ = store_.candidates(run_id_);
    }
    if (options_.sizes.empty()) options_.sizes = support::parse_sizes("1K:1G");
    topology_ = std::make_unique<topology::Topology>(topology::load_topology(options_.topology));
    bound_ = std::make_unique<topology::LowerBound>(
        topology::LowerBound::compute(*topology_, options_.collective));
    for (auto size : options_.sizes) bound_us_.push_back(bound_->at(size).time_us);
    topology_id_ =
        store_.put_topology(topology_->name(), topology::write_topology_json(*topology_));
    population_ = ProgramDatabase(options_.sizes.size(), kIslands, kPerIsland);
    best_.assign(options_.sizes.size(), Best{});
    if (!options_.resume) {
      db::RunInfo info;
      info.topology_id = topology_id_;
      info.topology_name = topology_->name();
      info.collective = std::string(support::to_string(options_.collective));
      info.sizes = options_.sizes;
      info.proposer = options_.proposer;
      info.seed = options_.seed;
      info.budget = options_.budget;
      info.host = hostname();
      info.git_revision = OPTIFLOW_GIT_REVISION;
      nlohmann::json saved{{"topology", options_.topology},
                           {"time_limit_s", options_.time_limit_s}};
      if (measuring()) {
        saved["hw_backend"] = options_.hw_backend;
        saved["hw_topk"] = options_.hw_topk;
      }
      info.options_json = saved.dump();
      run_id_ = store_.begin_run(info);
    } else {
      store_.set_run_status(run_id_, "running");
    }
    context_ = propose::ProposalContext{
        topology_.get(), options_.collective, options_.sizes, bound_us_, {},
        run_id_,         options_.seed};
    try {
      const auto nccl =
          baselines::run_baseline("nccl", *topology_, options_.collective, options_.sizes);
      for (std::uint64_t size : options_.sizes) {
        const baselines::BaselineRow& row = nccl.rows[nccl_row(nccl, size)];
        context_.nccl.push_back(propose::NcclAtSize{
            row.sim.time_us, row.algorithm + "/" + std::string(topology::to_string(row.protocol))});
      }
    } catch (const support::InputError& e) {
      nccl_missing_ = e.what();
    }
    try {
      proposer_ = make_proposer_(options_.proposer, context_);
    } catch (...) {
      store_.set_run_status(run_id_, "failed");
      throw;
    }
  }

  // Runs `step` unless the proposer has failed; a proposer that cannot go on ends the run
  // after the candidates already made are evaluated and stored.
  template <typename Step>
  void until_proposer_fails(Step&& step) {
    if (!failure_.empty()) return;
    try {
      step();
    } catch (const propose::ProposerError& e) {
      failure_ = e.what();
    }
  }

  bool out_of_time() const {
    return options_.time_limit_s > 0 &&
           std::chrono::duration<double>(Clock::now() - start_).count() > options_.time_limit_s;
  }

  // Asks the proposer for about `wanted` programs, one request per proposals_per_request()
  // of them; the candidates they will become start at `next_seq`. False when the proposer has
  // stopped (or makes nothing, round after round).
  bool request_proposals(std::int64_t next_seq, std::size_t wanted) {
    if (stop_reason_ = proposer_->stop_reason(); !stop_reason_.empty()) return false;
    const std::size_t per_request = std::max<std::size_t>(1, proposer_->proposals_per_request());
    std::vector<propose::ProposalRequest> requests;
    std::vector<std::pair<int, std::vector<std::int64_t>>> origins;  // island, parent ids
    for (std::size_t k = 0; k < wanted; k += per_request) {
      const auto seq = next_seq + static_cast<std::int64_t>(k);
      const int island =
          static_cast<int>(static_cast<std::size_t>(seq) % population_.island_count());
      propose::ProposalRequest request;
      request.seed = mix(options_.seed ^ mix(static_cast<std::uint64_t>(seq)));
      std::vector<std::int64_t> parent_ids;
      for (const Entry* p : population_.parents(static_cast<std::size_t>(island), rng_)) {
        request.parents.push_back(p->parent);
        parent_ids.push_back(p->program_id);
      }
      if (request.parents.empty())
        request.parents.push_back(
            propose::Parent{baseline_program(*topology_), {}, {}, {}, {}, {}});
      request.best = best_programs();
      request.failures.assign(recent_failures_.begin(), recent_failures_.end());
      request.known.assign(known_.begin(), known_.end());
      requests.push_back(std::move(request));
      origins.emplace_back(island, std::move(parent_ids));
    }
    auto answers = proposer_->propose(requests);
    std::size_t made = 0;
    for (std::size_t r = 0; r < answers.size() && r < requests.size(); ++r)
      for (propose::Proposal& p : answers[r]) {
        Candidate c = Candidate::of(std::move(p));
        c.island = origins[r].first;
        c.parent_ids = origins[r].second;
        pending_.push_back(std::move(c));
        ++made;
      }
    empty_rounds_ = made > 0 ? 0 : empty_rounds_ + 1;
    if (empty_rounds_ >= kMaxEmptyRounds)
      throw propose::ProposerError("the " + proposer_->name() + " proposer made no programs in " +
                                   std::to_string(kMaxEmptyRounds) + " rounds of requests");
    return true;
  }

  // The distinct programs that are best at some size, smallest size first (at most three).
  std::vector<propose::Parent> best_programs() const {
    std::vector<propose::Parent> best;
    std::vector<std::int64_t> ids;
    for (std::size_t s : {std::size_t{0}, best_.size() / 2, best_.size() - 1}) {
      if (s >= best_.size() || best_[s].time_us == 0) continue;
      if (std::find(ids.begin(), ids.end(), best_[s].program_id) != ids.end()) continue;
      ids.push_back(best_[s].program_id);
      best.push_back(best_[s].parent);
    }
    return best;
  }

  // Each candidate that failed gets one second try from its proposer (a model sees the
  // compiler's message), evaluated in its place before it counts as failed.
  void repair(std::vector<Candidate>& batch) {
    std::vector<propose::Rejection> rejected;
    std::vector<std::size_t> where;
    for (std::size_t i = 0; i < batch.size(); ++i)
      if (!batch[i].ok() && !batch[i].repaired) {
        rejected.push_back(propose::Rejection{
            {batch[i].source, batch[i].origin, batch[i].model_call_id}, batch[i].diagnostics()});
        where.push_back(i);
      }
    if (rejected.empty()) return;
    auto repaired = proposer_->repair(rejected);
    std::vector<Candidate> second;
    std::vector<std::size_t> second_at;
    for (std::size_t k = 0; k < where.size() && k < repaired.size(); ++k) {
      if (!repaired[k]) continue;
      Candidate c = Candidate::of(std::move(*repaired[k]));
      const Candidate& first = batch[where[k]];
      c.seq = first.seq;
      c.iteration = first.iteration;
      c.island = first.island;
      c.parent_ids = first.parent_ids;
      c.repaired = true;
      second.push_back(std::move(c));
      second_at.push_back(where[k]);
    }
    if (second.empty()) return;
    evaluate(second);
    for (std::size_t k = 0; k < second.size(); ++k) batch[second_at[k]] = std::move(second[k]);
  }

  // Parse serially (cheap, and finds repeats), compile and simulate in parallel.
  void evaluate(std::vector<Candidate>& batch) {
    std::vector<std::size_t> fresh;
    for (std::size_t i = 0; i < batch.size(); ++i) {
      Candidate& c = batch[i];
      c.parsed = parse_candidate(c.source);
      if (c.parsed.canonical.empty()) continue;
      if (auto it = seen_.find(c.parsed.canonical); it != seen_.end()) {
        c.compiled = it->second.first;
        c.simulated = it->second.second;
        c.reused = true;
        continue;
      }
      fresh.push_back(i);
      seen_[c.parsed.canonical];  // later repeats in this batch wait for this one
    }
    support::parallel_for(fresh.size(), options_.threads, [&](std::size_t k) {
      Candidate& c = batch[fresh[k]];
      c.compiled = compile_candidate(c.parsed, *topology_, options_.collective);
      c.parsed.program.reset();
    });
    // A different program may compile to a schedule simulated before: it costs no simulation.
    std::vector<std::size_t> to_simulate;
    for (std::size_t i : fresh) {
      Candidate& c = batch[i];
      if (!c.compiled.ok) continue;
      if (auto it = simulated_.find(c.compiled.schedule_hash); it != simulated_.end()) {
        c.simulated = it->second;
      } else if (simulated_.emplace(c.compiled.schedule_hash, Simulated{}).second) {
        to_simulate.push_back(i);
      }
    }
    support::parallel_for(to_simulate.size(), options_.threads, [&](std::size_t k) {
      Candidate& c = batch[to_simulate[k]];
      c.simulated = simulate_candidate(c.compiled.schedule, *topology_, options_.sizes);
    });
    for (std::size_t i : to_simulate)
      simulated_[batch[i].compiled.schedule_hash] = batch[i].simulated;
    for (std::size_t i : fresh)  // a repeat within this batch
      if (batch[i].compiled.ok && batch[i].simulated.time_us.empty())
        batch[i].simulated = simulated_[batch[i].compiled.schedule_hash];
    for (std::size_t i : fresh)
      seen_[batch[i].parsed.canonical] = {batch[i].compiled.light(), batch[i].simulated};
    for (Candidate& c : batch)
      if (c.reused) {
        c.compiled = seen_[c.parsed.canonical].first;
        c.simulated = seen_[c.parsed.canonical].second;
      }
  }

  bool measuring() const { return options_.measure && options_.hw_topk > 0; }

  // Mean over the sizes of log(simulated time / bound): how measurements are ranked.
  double mean_log_ratio(const Simulated& simulated) const {
    double sum = 0;
    for (std::size_t s = 0; s < bound_us_.size(); ++s)
      sum += std::log(simulated.time_us[s] / bound_us_[s]);
    return sum / static_cast<double>(bound_us_.size());
  }

  void warn(const std::string& message) const {
    if (options_.warn)
      options_.warn(message);
    else
      std::cerr << "warning: " << message << "\n";
  }

  // --hw: the batch's best hw_topk schedules by simulated time, each measured once per run.
  // A failed measurement leaves the candidate its simulated result, and is not retried.
  void measure(const std::vector<Candidate>& batch) {
    if (!measuring()) return;
    std::vector<std::pair<double, std::size_t>> ranked;
    std::set<std::string> hashes;
    for (std::size_t i = 0; i < batch.size(); ++i) {
      const Candidate& c = batch[i];
      // A reused candidate's schedule was a candidate's before (and is no longer kept).
      if (!c.ok() || c.reused || measured_.contains(c.compiled.schedule_hash) ||
          !hashes.insert(c.compiled.schedule_hash).second)
        continue;
      ranked.emplace_back(mean_log_ratio(c.simulated), i);
    }
    std::stable_sort(ranked.begin(), ranked.end(),
                     [](const auto& a, const auto& b) { return a.first < b.first; });
    ranked.resize(std::min(ranked.size(), static_cast<std::size_t>(options_.hw_topk)));
    for (const auto& [score, i] : ranked) {
      const Candidate& c = batch[i];
      std::optional<std::vector<double>> times;
      std::string why = "no result";
      try {
        times = options_.measure(c.compiled.schedule, options_.topology, options_.sizes);
      } catch (const std::exception& e) {
        why = e.what();
      }
      const bool valid = times && times->size() == options_.sizes.size() &&
                         std::all_of(times->begin(), times->end(), [](double t) { return t > 0; });
      if (!valid) {
        if (times) why = "a time missing or not positive";
        warn("candidate " + std::to_string(c.seq) + " (schedule " + c.compiled.schedule_hash +
             ") could not be measured on " + options_.hw_backend + ": " + why +
             "; it keeps its simulated result");
        measured_[c.compiled.schedule_hash] = std::nullopt;
        ++measure_failed_;
        continue;
      }
      measured_[c.compiled.schedule_hash] = std::move(times);
      ++measured_count_;
    }
  }

  // The candidate's measured times, or null when it was not measured.
  const std::vector<double>* measured_times(const Candidate& c) const {
    if (!c.ok()) return nullptr;
    const auto it = measured_.find(c.compiled.schedule_hash);
    return it != measured_.end() && it->second ? &*it->second : nullptr;
  }

  // Whether the candidate becomes size s's winner: measured times compete with measured ones
  // only, and once a size has a measured winner only a faster measurement replaces it.
  bool beats(std::size_t s, const Candidate& c, const std::vector<double>* hw) const {
    const Best& best = best_[s];
    if (hw) return best.measured_us == 0 || (*hw)[s] < best.measured_us;
    return best.measured_us == 0 && (best.time_us == 0 || c.simulated.time_us[s] < best.time_us);
  }

  void commit(Candidate& c) {
    const bool ok = c.ok();
    const std::vector<double>* hw = measured_times(c);
    const bool improves = ok && improves_some_size(c, hw);
    std::int64_t program_id = 0;
    if (static_cast<std::size_t>(c.seq) < committed_.size()) {
      const auto& stored = committed_[static_cast<std::size_t>(c.seq)];
      if (stored.program_source != c.stored_source())
        throw support::InputError(support::SourceLocation{options_.db_path, 0, 0, "--resume"},
                                  "run " + std::to_string(run_id_) +
                                      " cannot be resumed: candidate " + std::to_string(c.seq) +
                                      " is no longer reproduced (the code changed?)");
      program_id = stored.program_id;
    } else {
      db::CandidateRecord r;
      r.run_id = run_id_;
      r.seq = c.seq;
      r.iteration = c.iteration;
      r.island = c.island;
      r.program_source = c.stored_source();
      r.origin = c.origin;
      r.model_call_id = c.model_call_id;
      r.parent_program_ids = c.parent_ids;
      r.collective = std::string(support::to_string(options_.collective));
      r.compiled = ok;
      r.diagnostics = c.diagnostics();
      r.compile_ms = c.compiled.compile_ms;
      if (ok) {
        r.schedule_hash = c.compiled.schedule_hash;
        if (improves) r.schedule_json = schedule::write_schedule_json(c.compiled.schedule);
        r.schedule_chunks = c.compiled.chunks;
        r.schedule_steps = c.compiled.steps;
        for (std::size_t s = 0; s < options_.sizes.size(); ++s)
          r.sims.push_back(support::SizeResult{options_.sizes[s], c.simulated.time_us[s],
                                               c.simulated.algbw_GBps[s], c.simulated.busbw_GBps[s],
                                               bound_us_[s]});
      }
      program_id = store_.record_candidate(r);
    }
    Entry entry;
    entry.seq = c.seq;
    entry.program_id = program_id;
    entry.parent.source = c.stored_source();
    entry.parent.diagnostics = c.diagnostics();
    if (ok) {
      // What selection and proposers see: the measured times where there are some.
      entry.time_us = hw ? *hw : c.simulated.time_us;
      for (std::size_t s = 0; s < options_.sizes.size(); ++s) {
        support::SizeResult r;
        r.size_bytes = options_.sizes[s];
        r.time_us = entry.time_us[s];
        r.bound_us = bound_us_[s];
        r.measured = hw != nullptr;
        entry.parent.results.push_back(r);
      }
      entry.parent.busiest_links = c.simulated.busiest_links;
      entry.parent.idle_links = c.simulated.idle_links;
      entry.parent.critical_path = c.simulated.critical_path;
      record_best(entry, c, hw);
    } else {
      recent_failures_.push_front(entry.parent);
      if (recent_failures_.size() > kFailuresShown) recent_failures_.pop_back();
    }
    if (!c.reused) {
      known_.push_front(c.stored_source());
      if (known_.size() > kKnownShown) known_.pop_back();
    }
    population_.add(entry, c.island);
    ++evaluated_;
    compiled_ += ok ? 1 : 0;
  }

  bool improves_some_size(const Candidate& c, const std::vector<double>* hw) const {
    for (std::size_t s = 0; s < best_.size(); ++s)
      if (beats(s, c, hw)) return true;
    return false;
  }

  // Winners keep their schedule (moved out of the candidate, the last to need it), so that
  // finish() writes them without compiling again.
  void record_best(const Entry& entry, Candidate& c, const std::vector<double>* hw) {
    std::shared_ptr<const schedule::Schedule> kept;
    for (std::size_t s = 0; s < best_.size(); ++s)
      if (beats(s, c, hw)) {
        if (!kept)
          kept = std::make_shared<const schedule::Schedule>(std::move(c.compiled.schedule));
        best_[s] = Best{
            c.simulated.time_us[s], c.simulated.busbw_GBps[s], entry.program_id, entry.parent, kept,
            hw ? (*hw)[s] : 0.0};
      }
  }

  void report() const {
    if (!progress_) return;
    Progress p;
    p.run_id = run_id_;
    p.done = evaluated_;
    p.budget = options_.budget;
    p.seconds = std::chrono::duration<double>(Clock::now() - start_).count();
    p.sizes = options_.sizes;
    for (std::size_t s = 0; s < best_.size(); ++s) {
      p.best_busbw_GBps.push_back(best_[s].busbw_GBps);
      p.best_bound_ratio.push_back(best_[s].time_us > 0 ? best_[s].time_us / bound_us_[s] : 0);
    }
    progress_(p);
  }

  ExploreResult finish(std::int64_t seq) {
    ExploreResult result;
    result.run_id = run_id_;
    result.topology = topology_->name();
    result.candidates = seq;
    result.compiled = compiled_;
    result.measured = measured_count_;
    result.measure_failed = measure_failed_;
    result.nccl_missing = nccl_missing_;
    result.stop_reason = stop_reason_;
    result.failure = failure_;
    std::filesystem::create_directories(options_.out_dir);
    for (std::size_t s = 0; s < options_.sizes.size(); ++s) {
      if (best_[s].time_us == 0) continue;
      SizeWinner w;
      w.size_bytes = options_.sizes[s];
      w.program_id = best_[s].program_id;
      w.program_source = best_[s].parent.source;
      w.time_us = best_[s].time_us;
      w.busbw_GBps = best_[s].busbw_GBps;
      w.bound_us = bound_us_[s];
      w.measured_time_us = best_[s].measured_us;
      if (!context_.nccl.empty()) {
        w.nccl_time_us = context_.nccl[s].time_us;
        w.nccl_choice = context_.nccl[s].choice;
      }
      const schedule::Schedule& winner = *best_[s].schedule;
      const std::string stem = options_.out_dir + "/" +
                               std::string(support::to_string(options_.collective)) + "-" +
                               topology_->name() + "-" + std::to_string(w.size_bytes);
      w.schedule_path = stem + ".json";
      w.msccl_path = stem + ".xml";
      support::write_text_file(w.schedule_path, schedule::write_schedule_json(winner));
      schedule::MscclExportOptions xml;
      xml.min_bytes = s == 0 ? 0 : options_.sizes[s - 1] + 1;
      xml.max_bytes = w.size_bytes;
      support::write_text_file(w.msccl_path, schedule::write_msccl_xml(winner, xml));
      sim::SimOptions flow;
      flow.model = sim::Model::flow;
      w.flow_busbw_GBps = sim::Simulator(*topology_, winner, flow).run(w.size_bytes).busbw_GBps;
      result.winners.push_back(std::move(w));
    }
    result.seconds = std::chrono::duration<double>(Clock::now() - start_).count();
    return result;
  }

  struct Best {
    double time_us = 0, busbw_GBps = 0;
    std::int64_t program_id = 0;
    propose::Parent parent;  // its source and results, as proposers see them
    std::shared_ptr<const schedule::Schedule> schedule;
    double measured_us = 0;  // --hw: its measured time; 0 = not measured
  };

  ExploreOptions options_;
  const propose::ProposerFactory& make_proposer_;
  const ProgressSink& progress_;
  db::Store store_;
  Clock::time_point start_;
  std::int64_t run_id_ = 0, topology_id_ = 0, evaluated_ = 0, compiled_ = 0;
  std::vector<db::StoredCandidate> committed_;
  std::unique_ptr<topology::Topology> topology_;
  std::unique_ptr<topology::LowerBound> bound_;
  std::vector<double> bound_us_;
  propose::ProposalContext context_;
  std::unique_ptr<propose::Proposer> proposer_;
  ProgramDatabase population_{1, 1, 1};
  std::vector<Best> best_;
  std::map<std::string, std::pair<Compiled, Simulated>> seen_;  // by canonical program
  std::map<std::string, Simulated> simulated_;                  // by schedule hash
  // --hw: measured times by schedule hash; nullopt: the measurement failed (not retried).
  std::map<std::string, std::optional<std::vector<double>>> measured_;
  std::int64_t measured_count_ = 0, measure_failed_ = 0;
  std::mt19937_64 rng_{0};
  std::deque<Candidate> pending_;  // proposed, not yet evaluated
  std::deque<propose::Parent> recent_failures_;
  std::deque<std::string> known_;
  std::string nccl_missing_, stop_reason_, failure_;
  int empty_rounds_ = 0;
};

}  // namespace

ExploreResult explore(const ExploreOptions& options, const propose::ProposerFactory& make_proposer,
                      const ProgressSink& progress) {
  return Exploration(options, make_proposer, progress).run();
}

}  // namespace optiflow::explore
