// explore --distributed: rank 0 deals candidates to the other ranks (and to a thread of its
// own) as JSON messages and takes their results back; the messages carry program text and
// results, never schedules (a thousand-GPU schedule is a gigabyte; rank 0 compiles again the
// few that win).
#include "optiflow/explore/distributed.hpp"

#include <mpi.h>

#include <chrono>
#include <cstdlib>
#include <deque>
#include <future>
#include <iostream>
#include <map>
#include <nlohmann/json.hpp>
#include <set>
#include <stdexcept>
#include <string>
#include <thread>

#include "evaluator.hpp"
#include "optiflow/support/collective.hpp"
#include "optiflow/topology/topology_io.hpp"
#include "remote_evaluators.hpp"

namespace optiflow::explore {
namespace {

using json = nlohmann::json;
using Clock = std::chrono::steady_clock;

enum Tag : int { kSetup = 1, kTask = 2, kResult = 3, kStop = 4 };

void check(int code, const char* call) {
  if (code != MPI_SUCCESS)
    throw std::runtime_error(std::string("explore --distributed: ") + call + " failed");
}

void send_text(const std::string& text, int to, Tag tag) {
  check(MPI_Send(text.data(), static_cast<int>(text.size()), MPI_CHAR, to, tag, MPI_COMM_WORLD),
        "MPI_Send");
}

// The next message from `from` with `tag`, which must have arrived (probed) or be on its way.
std::string receive_text(MPI_Status& status, int from, int tag) {
  check(MPI_Probe(from, tag, MPI_COMM_WORLD, &status), "MPI_Probe");
  int count = 0;
  check(MPI_Get_count(&status, MPI_CHAR, &count), "MPI_Get_count");
  std::string text(static_cast<std::size_t>(count), '\0');
  check(MPI_Recv(text.data(), count, MPI_CHAR, status.MPI_SOURCE, status.MPI_TAG, MPI_COMM_WORLD,
                 MPI_STATUS_IGNORE),
        "MPI_Recv");
  return text;
}

// --- What travels: the setup, a task and its result. ---

json link_notes(const std::vector<propose::LinkNote>& notes) {
  json out = json::array();
  for (const propose::LinkNote& n : notes) out.push_back({n.from, n.to, n.utilisation});
  return out;
}

std::vector<propose::LinkNote> link_notes_from(const json& in) {
  std::vector<propose::LinkNote> notes;
  for (const json& n : in) notes.push_back({n.at(0), n.at(1), n.at(2)});
  return notes;
}

json result_message(std::size_t task, const Compiled& c, const Simulated& s) {
  json results = json::array();
  for (const support::SizeResult& r : s.results)
    results.push_back({r.size_bytes, r.time_us, r.algbw_GBps, r.busbw_GBps, r.bound_us});
  return {{"task", task},
          {"ok", c.ok},
          {"diagnostics", c.diagnostics},
          {"compile_ms", c.compile_ms},
          {"schedule_hash", c.schedule_hash},
          {"chunks", c.chunks},
          {"steps", c.steps},
          {"results", results},
          {"busiest_links", link_notes(s.busiest_links)},
          {"idle_links", link_notes(s.idle_links)},
          {"critical_path", s.critical_path}};
}

void fill_from_result(const json& m, Candidate& c) {
  c.compiled.ok = m.at("ok");
  c.compiled.diagnostics = m.at("diagnostics");
  c.compiled.compile_ms = m.at("compile_ms");
  c.compiled.schedule_hash = m.at("schedule_hash");
  c.compiled.chunks = m.at("chunks");
  c.compiled.steps = m.at("steps");
  c.simulated = {};
  for (const json& r : m.at("results")) {
    support::SizeResult result;
    result.size_bytes = r.at(0);
    result.time_us = r.at(1);
    result.algbw_GBps = r.at(2);
    result.busbw_GBps = r.at(3);
    result.bound_us = r.at(4);
    c.simulated.results.push_back(result);
  }
  c.simulated.busiest_links = link_notes_from(m.at("busiest_links"));
  c.simulated.idle_links = link_notes_from(m.at("idle_links"));
  c.simulated.critical_path = m.at("critical_path");
}

// --- The other ranks: evaluate what rank 0 sends until it says stop. ---

// For tests of a rank that hangs: OPTIFLOW_TEST_HANG_RANK=R makes rank R stop answering at its
// first task.
bool told_to_hang(int rank) {
  const char* value = std::getenv("OPTIFLOW_TEST_HANG_RANK");
  return value != nullptr && std::atoi(value) == rank;
}

// Rank 0's next message. Waits by polling and sleeping: a blocking MPI_Probe spins in Open
// MPI and would take the core from a rank that computes, where ranks outnumber cores.
std::string await_rank0(MPI_Status& status) {
  for (int polls = 0;; ++polls) {
    int arrived = 0;
    check(MPI_Iprobe(0, MPI_ANY_TAG, MPI_COMM_WORLD, &arrived, &status), "MPI_Iprobe");
    if (arrived) return receive_text(status, 0, status.MPI_TAG);
    if (polls < 100)
      std::this_thread::yield();
    else
      std::this_thread::sleep_for(std::chrono::microseconds(200));
  }
}

void serve(int rank) {
  std::optional<topology::Topology> topology;
  support::Collective collective = support::Collective::all_gather;
  Reference reference;
  std::string setup_error = "a task before the setup";
  for (;;) {
    MPI_Status status;
    const std::string text = await_rank0(status);
    if (status.MPI_TAG == kStop) return;
    const json message = json::parse(text);
    if (status.MPI_TAG == kSetup) {
      try {
        topology = topology::parse_topology_json(message.at("topology").get<std::string>(),
                                                 "rank 0's topology");
        collective = *support::collective_from_string(message.at("collective").get<std::string>());
        reference.sizes = message.at("sizes").get<std::vector<std::uint64_t>>();
        reference.bound_us = message.at("bound_us").get<std::vector<double>>();
      } catch (const std::exception& e) {
        topology.reset();
        setup_error = std::string("the setup: ") + e.what();
      }
      continue;
    }
    const std::size_t task = message.at("task");
    if (told_to_hang(rank))
      for (;;) std::this_thread::sleep_for(std::chrono::hours(1));
    json reply;
    try {
      if (!topology) throw std::runtime_error(setup_error);
      const Parsed parsed = parse_candidate(message.at("source").get<std::string>());
      const Compiled compiled = compile_candidate(parsed, *topology, collective);
      const Simulated simulated =
          compiled.ok ? simulate_candidate(compiled.schedule, *topology, reference) : Simulated{};
      reply = result_message(task, compiled, simulated);
    } catch (const std::exception& e) {
      reply = {{"task", task}, {"error", e.what()}};
    }
    send_text(reply.dump(), 0, kResult);
  }
}

// --- Rank 0: deal the candidates, evaluate too, take the results back. ---

class RankFarm final : public RemoteEvaluators {
 public:
  RankFarm(int ranks, double timeout_s, std::function<void(const std::string&)> warn)
      : timeout_s_(timeout_s), warn_(std::move(warn)) {
    for (int r = 1; r < ranks; ++r) free_.push_back(r);
  }

  void start(const topology::Topology& topology, support::Collective collective,
             const Reference& reference) override {
    const std::string setup = json{
        {"topology", topology::write_topology_json(topology)},
        {"collective", support::to_string(collective)},
        {"sizes", reference.sizes},
        {"bound_us",
         reference.bound_us}}.dump();
    for (int r : free_) send_text(setup, r, kSetup);
  }

  // Each free rank gets the next candidate, and so does a thread of rank 0's own whenever it is
  // free; this thread only deals and collects (MPI is called from it alone), so that no rank
  // waits for rank 0 to finish a candidate. A rank past its time is given up and its candidate
  // dealt again.
  void evaluate(std::span<Candidate* const> todo,
                const std::function<void(Candidate&)>& here) override {
    std::deque<std::size_t> waiting;
    for (std::size_t i = 0; i < todo.size(); ++i) waiting.push_back(i);
    std::future<void> local;
    while (!waiting.empty() || !busy_.empty() || local.valid()) {
      while (!free_.empty() && !waiting.empty()) deal(todo, waiting, free_.front());
      if (!local.valid() && !waiting.empty()) {
        Candidate* c = todo[waiting.front()];
        waiting.pop_front();
        local = std::async(std::launch::async, [&here, c] { here(*c); });
      }
      if (local.valid() && local.wait_for(std::chrono::seconds(0)) == std::future_status::ready)
        local.get();
      if (!collect(todo, waiting)) std::this_thread::sleep_for(std::chrono::microseconds(200));
      give_up_late_ranks(todo, waiting);
    }
  }

  // Stops every rank still answering; false where some rank was given up (it cannot stop).
  bool stop() {
    for (int r : free_) send_text("", r, kStop);
    free_.clear();
    return given_up_.empty();
  }

 private:
  struct Busy {
    std::size_t task;
    Clock::time_point since;
  };

  void deal(std::span<Candidate* const> todo, std::deque<std::size_t>& waiting, int rank) {
    const std::size_t task = waiting.front();
    waiting.pop_front();
    free_.pop_front();
    send_text(json{{"task", task}, {"source", todo[task]->parsed.canonical}}.dump(), rank, kTask);
    busy_[rank] = Busy{task, Clock::now()};
  }

  // Takes every result that has arrived; whether there was one.
  bool collect(std::span<Candidate* const> todo, std::deque<std::size_t>& waiting) {
    bool any = false;
    for (;;) {
      int arrived = 0;
      MPI_Status status;
      check(MPI_Iprobe(MPI_ANY_SOURCE, kResult, MPI_COMM_WORLD, &arrived, &status), "MPI_Iprobe");
      if (!arrived) return any;
      any = true;
      const int rank = status.MPI_SOURCE;
      const json m = json::parse(receive_text(status, rank, kResult));
      if (given_up_.contains(rank)) continue;  // late: its candidate went elsewhere
      busy_.erase(rank);
      const std::size_t task = m.at("task");
      if (m.contains("error")) {
        warn_("rank " + std::to_string(rank) + " could not evaluate candidate " +
              std::to_string(todo[task]->seq) + " (" + m.at("error").get<std::string>() +
              "); it is evaluated elsewhere and the rank is sent no more");
        send_text("", rank, kStop);
        waiting.push_front(task);
        continue;
      }
      fill_from_result(m, *todo[task]);
      free_.push_back(rank);
    }
  }

  void give_up_late_ranks(std::span<Candidate* const> todo, std::deque<std::size_t>& waiting) {
    const auto now = Clock::now();
    for (auto it = busy_.begin(); it != busy_.end();) {
      if (std::chrono::duration<double>(now - it->second.since).count() <= timeout_s_) {
        ++it;
        continue;
      }
      warn_("rank " + std::to_string(it->first) + " did not answer within " +
            std::to_string(static_cast<int>(timeout_s_)) + " s (candidate " +
            std::to_string(todo[it->second.task]->seq) +
            "); it is given up and its candidate evaluated elsewhere");
      given_up_.insert(it->first);
      waiting.push_front(it->second.task);
      it = busy_.erase(it);
    }
  }

  double timeout_s_;
  std::function<void(const std::string&)> warn_;
  std::deque<int> free_;
  std::map<int, Busy> busy_;
  std::set<int> given_up_;
};

}  // namespace

struct DistributedJob::State {
  int rank = 0, size = 1;
  bool abort = false;  ///< a rank was given up: MPI_Finalize would wait for it forever
};

DistributedJob::DistributedJob() : state_(std::make_unique<State>()) {
  int initialised = 0;
  MPI_Initialized(&initialised);
  if (!initialised) {
    int provided = 0;
    check(MPI_Init_thread(nullptr, nullptr, MPI_THREAD_FUNNELED, &provided), "MPI_Init_thread");
  }
  MPI_Comm_rank(MPI_COMM_WORLD, &state_->rank);
  MPI_Comm_size(MPI_COMM_WORLD, &state_->size);
}

DistributedJob::~DistributedJob() {
  if (state_->abort) {
    std::cout.flush();
    std::cerr << "explore --distributed: a rank was given up and cannot join the end of the "
                 "job; ending it with MPI_Abort (everything is stored)\n";
    MPI_Abort(MPI_COMM_WORLD, 3);
  }
  MPI_Finalize();
}

int DistributedJob::rank() const {
  return state_->rank;
}

int DistributedJob::size() const {
  return state_->size;
}

std::optional<ExploreResult> DistributedJob::explore(const ExploreOptions& options,
                                                     const propose::ProposerFactory& make_proposer,
                                                     const ProgressSink& progress,
                                                     const DistributedOptions& distributed) {
  if (state_->rank != 0) {
    serve(state_->rank);
    return std::nullopt;
  }
  if (state_->size == 1) return optiflow::explore::explore(options, make_proposer, progress);
  RankFarm farm(state_->size, distributed.rank_timeout_s,
                [&options](const std::string& m) { options.warning(m); });
  try {
    ExploreResult result = explore_with(options, make_proposer, progress, &farm);
    state_->abort = !farm.stop();
    return result;
  } catch (...) {
    state_->abort = !farm.stop();
    throw;
  }
}

}  // namespace optiflow::explore
