// The exploration loop (docs/explore.md). Proposals are made and committed in sequence order;
// only compilation and simulation run in parallel, so the same seed gives the same run
// whatever the thread count.
#include "optiflow/explore/explore.hpp"

#include <chrono>
#include <iostream>
#include <memory>

#include "batch_evaluator.hpp"
#include "hw_measurements.hpp"
#include "optiflow/baselines/baseline.hpp"
#include "optiflow/explore/sweep.hpp"
#include "optiflow/support/error.hpp"
#include "optiflow/support/strings.hpp"
#include "optiflow/topology/topology_io.hpp"
#include "program_database.hpp"
#include "proposal_feed.hpp"
#include "remote_evaluators.hpp"
#include "run_record.hpp"
#include "winners.hpp"

namespace optiflow::explore {
namespace {

constexpr std::size_t kIslands = 4;
constexpr std::size_t kPerIsland = 8;
constexpr std::int64_t kMigrateEvery = 4;  // iterations
// The floor's synthesizers (TACCL, TE-CCL) stay within seconds up to this many GPUs; beyond,
// their MILPs take minutes even under a solver time limit (docs/results.md, "Scaling").
constexpr std::int32_t kFloorSolverRanks = 64;
// Their MIPs stop after this many branch-and-bound nodes, so that the floor, and with it the
// run, is the same on any machine (unless the time limit, a safety net, binds first).
constexpr int kFloorSolverNodes = 1000;

using Clock = std::chrono::steady_clock;

class Exploration {
 public:
  Exploration(const ExploreOptions& options, const propose::ProposerFactory& make_proposer,
              const ProgressSink& progress, RemoteEvaluators* remote)
      : start_(Clock::now()),
        options_(options),
        record_(options_),
        topology_(topology::load_topology(options_.topology)),
        reference_(
            Reference::compute(topology_, options_.collective, sizes_or_default(options_.sizes))),
        evaluator_(topology_, options_.collective, reference_, options_.threads),
        population_(reference_.sizes.size(), kIslands, kPerIsland),
        winners_(reference_),
        hw_(options_),
        progress_(progress) {
    options_.sizes = reference_.sizes;
    if (!options_.floor) options_.floor = default_floor(topology_.rank_count());
    if (remote) {
      remote->start(topology_, options_.collective, reference_);
      evaluator_.use_remote(remote);
    }
    record_.begin(options_, topology_);
    context_ = propose::ProposalContext{&topology_,          options_.collective, reference_.sizes,
                                        reference_.bound_us, reference_.nccl,     record_.id(),
                                        options_.seed};
    try {
      proposer_ = make_proposer(options_.proposer, context_);
    } catch (...) {
      record_.end("failed");
      throw;
    }
    feed_ =
        std::make_unique<ProposalFeed>(*proposer_, population_, winners_, topology_, options_.seed);
    build_floor();
    // Only a candidate that beats the winners at some size can become one: the others'
    // schedules are dropped as soon as they are simulated (measurements need every schedule).
    evaluator_.keep_schedules_of_winners([this]() -> std::optional<std::vector<double>> {
      if (hw_.active()) return std::nullopt;
      return winners_.simulated_times();
    });
  }

  ExploreResult run() {
    std::int64_t seq = 0, iteration = 0;
    until_proposer_fails([&] { feed_->queue_initial(); });
    while (seq < options_.budget && !out_of_time() && failure_.empty()) {
      std::vector<Candidate> batch;
      until_proposer_fails([&] { feed_->fill(batch, seq, options_.budget, iteration); });
      if (batch.empty()) break;
      evaluator_.evaluate(batch);
      until_proposer_fails([&] { feed_->repair(batch, evaluator_); });
      hw_.measure(batch);
      for (Candidate& c : batch) commit(c);
      if (++iteration % kMigrateEvery == 0) population_.migrate();
      report();
      if (options_.should_stop && options_.should_stop()) break;
    }
    record_.end(!failure_.empty()                                         ? "failed"
                : seq >= options_.budget || !feed_->stop_reason().empty() ? "finished"
                                                                          : "interrupted");
    return finish(seq);
  }

 private:
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

  // Each baseline of the floor holds the sizes where it is the fastest so far; one that does
  // not build here (a collective or a shape it does not take) is left out, saying why. NCCL's
  // is the reference's, already built.
  void build_floor() {
    for (const std::string& name : *options_.floor) {
      if (name == "nccl") {
        if (reference_.nccl_schedule)
          winners_.offer_baseline(name, reference_.nccl_schedule, reference_.nccl_results);
        else
          floor_missing_.push_back(name + ": " + reference_.nccl_missing);
        continue;
      }
      try {
        if (name == "taccl")
          offer_taccl();
        else
          offer(name);
      } catch (const support::InputError& e) {
        floor_missing_.push_back(name + ": " + e.what());
      } catch (const support::UnsupportedError& e) {
        floor_missing_.push_back(name + ": " + e.what());
      }
    }
  }

  void offer(const std::string& name) {
    if (name == "teccl") refuse_if_too_large(name);
    offer(baselines::run_baseline(name, topology_, options_.collective, reference_.sizes, {},
                                  floor_synthesis()));
  }

  // TACCL as its evaluation runs it: one synthesis, then 1, 2, 4 and 8 instances, each
  // holding the sizes where it is the fastest.
  void offer_taccl() {
    refuse_if_too_large("taccl");
    const baselines::Synthesized built =
        baselines::taccl_synthesize(topology_, options_.collective, floor_synthesis());
    for (int instances : {1, 2, 4, 8})
      offer(baselines::run_synthesized(
          instances == 1 ? "taccl" : support::strprintf("taccl, %d instances", instances),
          baselines::with_instances(built, instances), topology_, reference_.sizes));
  }

  void refuse_if_too_large(const std::string& synthesizer) const {
    if (topology_.rank_count() > kFloorSolverRanks)
      throw support::UnsupportedError(
          support::UnsupportedError::Subject::topology,
          support::strprintf("left out over %d GPUs, where its MIPs take minutes (`optiflow "
                             "baseline %s` builds it without this limit)",
                             kFloorSolverRanks, synthesizer.c_str()));
  }

  baselines::SynthesisOptions floor_synthesis() const {
    baselines::SynthesisOptions synthesis;
    synthesis.time_limit_s = options_.floor_time_limit_s;
    synthesis.max_nodes = kFloorSolverNodes;
    return synthesis;
  }

  void offer(baselines::BaselineRun run) {
    std::vector<support::SizeResult> results;
    for (std::uint64_t size : reference_.sizes) results.push_back(run.row_at(size).sim);
    winners_.offer_baseline(
        run.name, std::make_shared<const schedule::Schedule>(std::move(run.schedule)), results);
  }

  bool out_of_time() const {
    return options_.time_limit_s > 0 &&
           std::chrono::duration<double>(Clock::now() - start_).count() > options_.time_limit_s;
  }

  void commit(Candidate& c) {
    const std::vector<double>* hw = hw_.times(c);
    const bool improves = c.ok() && winners_.improves_some_size(c, hw);
    Entry entry;
    entry.seq = c.seq;
    entry.program_id = record_.commit(c, options_.collective, improves);
    entry.parent = parent_of(c, hw);
    if (c.ok()) {
      for (const support::SizeResult& r : entry.parent.results) entry.time_us.push_back(r.time_us);
      winners_.record(c, entry.program_id, entry.parent, hw);
    }
    feed_->remember(c, entry.parent);
    population_.add(entry, c.island);
    ++evaluated_;
    compiled_ += c.ok() ? 1 : 0;
  }

  // What selection and proposers see of a candidate: the measured times where there are some.
  propose::Parent parent_of(const Candidate& c, const std::vector<double>* hw) const {
    propose::Parent parent;
    parent.source = c.stored_source();
    parent.diagnostics = c.diagnostics();
    if (!c.ok()) return parent;
    parent.results = c.simulated.results;
    if (hw)
      for (std::size_t s = 0; s < parent.results.size(); ++s)
        parent.results[s] = measured(parent.results[s], (*hw)[s]);
    parent.busiest_links = c.simulated.busiest_links;
    parent.idle_links = c.simulated.idle_links;
    parent.critical_path = c.simulated.critical_path;
    return parent;
  }

  support::SizeResult measured(const support::SizeResult& simulated, double time_us) const {
    support::SizeResult r = support::size_result(options_.collective, topology_.rank_count(),
                                                 simulated.size_bytes, time_us);
    r.bound_us = simulated.bound_us;
    r.measured = true;
    return r;
  }

  void report() const {
    if (!progress_) return;
    Progress p;
    p.run_id = record_.id();
    p.done = evaluated_;
    p.budget = options_.budget;
    p.seconds = std::chrono::duration<double>(Clock::now() - start_).count();
    p.sizes = reference_.sizes;
    winners_.fill(p);
    progress_(p);
  }

  ExploreResult finish(std::int64_t seq) {
    ExploreResult result;
    result.run_id = record_.id();
    result.topology = topology_.name();
    result.candidates = seq;
    result.compiled = compiled_;
    result.measured = hw_.measured();
    result.measure_failed = hw_.failed();
    if (hw_.active()) result.hw_fidelity = hw_.fidelity();
    result.nccl_missing = reference_.nccl_missing;
    result.floor_missing = floor_missing_;
    result.stop_reason = feed_->stop_reason();
    result.failure = failure_;
    result.winners = winners_.write(options_.out_dir, topology_, options_.collective);
    result.seconds = std::chrono::duration<double>(Clock::now() - start_).count();
    return result;
  }

  Clock::time_point start_;
  ExploreOptions options_;
  RunRecord record_;  // first: a resumed run's options come from it
  topology::Topology topology_;
  Reference reference_;
  BatchEvaluator evaluator_;
  ProgramDatabase population_;
  Winners winners_;
  HwMeasurements hw_;
  const ProgressSink& progress_;
  propose::ProposalContext context_;
  std::unique_ptr<propose::Proposer> proposer_;
  std::unique_ptr<ProposalFeed> feed_;
  std::int64_t evaluated_ = 0, compiled_ = 0;
  std::string failure_;
  std::vector<std::string> floor_missing_;
};

}  // namespace

std::vector<std::string> default_floor(std::int32_t ranks) {
  std::vector<std::string> floor = {"nccl", "forestcoll"};
  if (ranks <= kDefaultFloorTacclRanks) floor.push_back("taccl");
  return floor;
}

void ExploreOptions::warning(const std::string& message) const {
  if (warn)
    warn(message);
  else
    std::cerr << "warning: " << message << "\n";
}

ExploreResult explore_with(const ExploreOptions& options,
                           const propose::ProposerFactory& make_proposer,
                           const ProgressSink& progress, RemoteEvaluators* remote) {
  return Exploration(options, make_proposer, progress, remote).run();
}

ExploreResult explore(const ExploreOptions& options, const propose::ProposerFactory& make_proposer,
                      const ProgressSink& progress) {
  return explore_with(options, make_proposer, progress, nullptr);
}

}  // namespace optiflow::explore
