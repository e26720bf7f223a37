// The event loop: steps start when their prerequisites have completed; a step that sends
// completes when its data arrives; the network model decides when that is.
#include "optiflow/sim/simulator.hpp"

#include <algorithm>
#include <array>
#include <optional>
#include <type_traits>

#include "alpha_beta_network.hpp"
#include "flow_network.hpp"
#include "optiflow/support/error.hpp"
#include "optiflow/support/units.hpp"
#include "step_graph.hpp"

namespace optiflow::sim {
namespace {

constexpr std::array<std::pair<Model, std::string_view>, 2> kModelNames{
    {{Model::alpha_beta, "alpha-beta"}, {Model::flow, "flow"}}};

}  // namespace

std::string_view to_string(Model model) {
  for (const auto& [m, name] : kModelNames)
    if (m == model) return name;
  return "?";
}

std::optional<Model> model_from_string(std::string_view name) {
  for (const auto& [m, text] : kModelNames)
    if (text == name) return m;
  return std::nullopt;
}

struct Simulator::Impl {
  const topology::Topology& topology;
  support::Collective collective;
  std::int32_t ranks;
  std::string name;
  SimOptions options;
  double overhead_us;
  StepGraph graph;
  /// The schedule's protocol per size: (max_bytes, protocol), then the one for larger sizes.
  std::vector<std::pair<std::uint64_t, topology::Protocol>> protocol_ranges;
  topology::Protocol protocol = topology::Protocol::simple;
  std::optional<FlowRoutes> flow_routes;  // for the flow model only

  topology::Protocol protocol_for(std::uint64_t size_bytes) const {
    if (options.protocol) return *options.protocol;
    for (const auto& [max_bytes, p] : protocol_ranges)
      if (size_bytes <= max_bytes) return p;
    return protocol;
  }
};

namespace {

topology::Protocol known_protocol(const schedule::Schedule& schedule, std::string_view name) {
  if (auto protocol = topology::protocol_from_string(name)) return *protocol;
  throw support::InputError(support::SourceLocation{schedule.name, 0, 0, "protocol"},
                            "unknown protocol '" + std::string(name) + "' (LL|LL128|Simple)");
}

// Each model's network over the simulator's graph; the flow model's with the routes it studied
// once.
template <Network Net>
Net network_for(const Simulator::Impl& impl) {
  if constexpr (std::is_same_v<Net, FlowNetwork>)
    return FlowNetwork(impl.topology, impl.graph, *impl.flow_routes);
  else
    return Net(impl.topology, impl.graph);
}

// A step as its rank's one core sees it (RuntimeCosts::serial_steps).
struct CoreWork {
  std::int32_t rank = 0;
  double us = 0;  // how long the core works on it
};

// One simulation at one size: the textbook loop over a time-ordered event queue. Time starts
// at the protocol's launch cost; a step starts when its prerequisites have completed; a send
// completes when a free slot of its connection takes its data, a receive when the data has
// arrived; the network model decides when that is.
template <Network Net>
class Run {
 public:
  Run(const Simulator::Impl& impl, std::uint64_t size_bytes)
      : impl_(impl),
        graph_(impl.graph),
        size_(static_cast<double>(size_bytes)),
        protocol_(impl.protocol_for(size_bytes)),
        costs_(impl.options.protocol_costs ? *impl.options.protocol_costs
                                           : topology::protocol_costs(impl.topology, protocol_)),
        runtime_(impl.topology.runtime() ? &*impl.topology.runtime() : nullptr),
        overhead_us_(impl.overhead_us),
        core_free_(runtime_ && runtime_->serial_steps ? static_cast<std::size_t>(impl.ranks) : 0,
                   0.0),
        core_work_(core_work()),
        slots_(impl.options.slots),
        network_(network_for<Net>(impl)),
        arrival_(impl.options.record_timeline ? graph_.transfers.size() : 0, 0),
        received_(static_cast<std::size_t>(graph_.connections), 0),
        blocked_(static_cast<std::size_t>(graph_.connections), -1) {
    state_.reserve(graph_.steps.size());
    for (const std::int32_t prerequisites : graph_.prerequisites)
      state_.push_back(StepState{costs_.launch_us, -1, prerequisites, -1});
    route_costs_.reserve(graph_.routes.size());
    for (const SimRoute& route : graph_.routes)
      route_costs_.push_back(topology::transfer_cost(route.cost, costs_));
    for (StepIndex s : graph_.initially_ready)
      ready_.push_back(Ready{start_key(graph_.step(s)), s});
  }

  SimResult execute() {
    double now = costs_.launch_us;
    std::vector<std::int32_t> arrived;
    while (true) {
      while (!ready_.empty()) {
        starting_.swap(ready_);
        auto by_key = [](const Ready& a, const Ready& b) { return a.key < b.key; };
        if (!std::is_sorted(starting_.begin(), starting_.end(), by_key))
          std::sort(starting_.begin(), starting_.end(), by_key);
        for (const Ready& ready : starting_) start(ready.step, now);
        starting_.clear();
      }
      const double next =
          std::min({delayed_.next_time(), queued_for_core_.next_time(), network_.next_arrival()});
      if (next == kNever) break;
      now = next;
      while (delayed_.next_time() <= now) overhead_paid(delayed_.pop(), now);
      while (queued_for_core_.next_time() <= now) overhead_paid(queued_for_core_.pop(), now);
      arrived.clear();
      network_.take_arrivals(now, arrived);
      for (std::int32_t id : arrived) {
        const SimTransfer& t = graph_.transfer(id);
        if (!arrival_.empty()) arrival_[static_cast<std::size_t>(id)] = now;
        satisfy(t.recv_step, now, t.send_step);
      }
    }
    return result();
  }

 private:
  void start(StepIndex s, double now) {
    if (!core_free_.empty()) {
      // The rank's one core works on its steps in turn.
      const CoreWork& work = core_work_[static_cast<std::size_t>(s)];
      double& free = core_free_[static_cast<std::size_t>(work.rank)];
      free = std::max(free, now) + work.us;
      queued_for_core_.push(free, s);
    } else if (overhead_us_ > 0) {
      delayed_.push(now + overhead_us_, s);
    } else {
      overhead_paid(s, now);
    }
  }

  // With serial_steps, per step: its rank, and how long that rank's core works on it. The
  // step's overhead, and each message it sends or receives costs its band's alpha at either
  // end (matching, handshakes, starting the copy): work that queues behind the rank's other
  // steps.
  std::vector<CoreWork> core_work() const {
    if (core_free_.empty()) return {};
    std::vector<CoreWork> work;
    work.reserve(graph_.steps.size());
    for (std::size_t s = 0; s < graph_.steps.size(); ++s)
      work.push_back(CoreWork{graph_.name(static_cast<StepIndex>(s)).rank, overhead_us_});
    for (const SimTransfer& t : graph_.transfers)
      if (const topology::MessageBand* band = runtime_->band_for(t.fraction * size_)) {
        work[static_cast<std::size_t>(t.send_step)].us += band->alpha_us;
        work[static_cast<std::size_t>(t.recv_step)].us += band->alpha_us;
      }
    return work;
  }

  // A message's cost in its band: the band's share of the links' bandwidth, and its alpha on
  // the route unless the ranks' cores pay it (core_times).
  topology::TransferCost message_cost(const topology::TransferCost& cost, double bytes) const {
    const topology::MessageBand* band = runtime_ ? runtime_->band_for(bytes) : nullptr;
    if (band == nullptr) return cost;
    topology::MessageBand on_the_route = *band;
    if (!core_free_.empty()) on_the_route.alpha_us = 0;
    return topology::in_band(cost, on_the_route);
  }

  void overhead_paid(StepIndex s, double now) {
    graph_.step(s).transfer >= 0 ? hand_off_or_wait(s, now) : complete(s, now);
  }

  // A send takes a slot of its connection: the k-th message needs the (k - slots)-th received.
  bool has_slot(const SimTransfer& t) const {
    return t.message - received_[static_cast<std::size_t>(t.connection)] < slots_;
  }

  void hand_off_or_wait(StepIndex s, double now) {
    const std::int32_t id = graph_.step(s).transfer;
    const SimTransfer& t = graph_.transfer(id);
    if (!has_slot(t)) {
      blocked_[static_cast<std::size_t>(t.connection)] = s;
      return;
    }
    const double bytes = t.fraction * size_;
    network_.launch(id, bytes, message_cost(route_costs_[static_cast<std::size_t>(t.route)], bytes),
                    now);
    complete(s, now);
  }

  void complete(StepIndex s, double now) {
    const SimStep& step = graph_.step(s);
    state(s).end = now;
    ++completed_;
    // Time only moves forward: the last step to finish, the first in schedule order among ties.
    if (last_ < 0 || now > last_end_ || graph_.schedule_index(s) < graph_.schedule_index(last_)) {
      last_ = s;
      last_end_ = now;
    }
    if (step.in_connection >= 0) free_slot(step.in_connection, now);
    if (step.next_in_tb >= 0) satisfy(step.next_in_tb, now, s);
    for (std::int32_t i = step.dependents_begin; i < step.dependents_end; ++i)
      satisfy(graph_.dependents[static_cast<std::size_t>(i)], now, s);
  }

  void free_slot(std::int32_t connection, double now) {
    const auto c = static_cast<std::size_t>(connection);
    ++received_[c];
    const StepIndex waiting = blocked_[c];
    if (waiting < 0) return;
    blocked_[c] = -1;
    hand_off_or_wait(waiting, now);
  }

  // One prerequisite of `s`, set by `cause`, is met at `now`.
  void satisfy(StepIndex s, double now, StepIndex cause) {
    StepState& state = this->state(s);
    // Without a branch: which prerequisite comes last is the schedule's, not predictable.
    const bool latest = now >= state.latest;
    state.latest = latest ? now : state.latest;
    state.cause = latest ? cause : state.cause;
    if (--state.pending == 0) ready_.push_back(Ready{start_key(graph_.step(s)), s});
  }

  SimResult result() const {
    if (completed_ < graph_.steps.size()) stalled(first_never_ran());
    SimResult r;
    static_cast<support::SizeResult&>(r) =
        support::size_result(impl_.collective, impl_.ranks, static_cast<std::uint64_t>(size_),
                             last_ < 0 ? 0 : state(last_).end);
    r.protocol = protocol_;
    for (StepIndex s = last_; s >= 0; s = state(s).cause) {
      const StepName name = graph_.name(s);
      r.critical_path.push_back(
          CriticalStep{name.rank, name.tb, name.step, name.kind, state(s).latest, state(s).end});
    }
    std::reverse(r.critical_path.begin(), r.critical_path.end());
    const std::vector<double>& bytes = network_.link_bytes();
    for (topology::LinkId l = 0; l < bytes.size(); ++l) {
      if (bytes[l] == 0) continue;
      const double capacity = support::bytes_per_us(impl_.topology.link(l).bw_GBps) * r.time_us;
      r.links.push_back(LinkUsage{l, network_.link_busy_us()[l], bytes[l],
                                  capacity > 0 ? bytes[l] / capacity : 0});
    }
    if (impl_.options.record_timeline) r.timeline = timeline();
    return r;
  }

  StepIndex first_never_ran() const {
    StepIndex first = -1;
    for (std::size_t i = 0; i < graph_.steps.size(); ++i) {
      const auto s = static_cast<StepIndex>(i);
      if (state_[i].end < 0 &&
          (first < 0 || graph_.schedule_index(s) < graph_.schedule_index(first)))
        first = s;
    }
    return first;
  }

  // The first step that never ran: a send still waiting for a slot is the schedule holding
  // more messages in flight than a connection has (the verifier assumes unbounded FIFOs).
  [[noreturn]] void stalled(StepIndex s) const {
    std::string waits;
    for (StepIndex blocked : blocked_) {
      if (blocked < 0) continue;
      const StepName send = graph_.name(blocked);
      waits = "; rank " + std::to_string(send.rank) + " tb " + std::to_string(send.tb) + " step " +
              std::to_string(send.step) + " waits for a slot: its connection holds " +
              std::to_string(impl_.options.slots) + " steps in flight, as NCCL's do";
      break;
    }
    const StepName step = graph_.name(s);
    throw support::InputError(
        support::SourceLocation{impl_.name, 0, 0, {}},
        "the simulation stalls: rank " + std::to_string(step.rank) + " tb " +
            std::to_string(step.tb) + " step " + std::to_string(step.step) + " never runs" +
            (waits.empty() ? " (verify the schedule with `optiflow check`)" : waits));
  }

  // Every transfer in schedule order (of its send), then stably by start.
  std::vector<TransferRecord> timeline() const {
    std::vector<TransferRecord> records;
    records.reserve(graph_.transfers.size());
    for (std::uint32_t i = 0; i < graph_.steps.size(); ++i) {
      const StepIndex s = graph_.run_step(i);
      const std::int32_t id = graph_.step(s).transfer;
      if (id < 0) continue;
      const SimTransfer& t = graph_.transfer(id);
      const StepName send = graph_.name(s);
      const StepName recv = graph_.name(t.recv_step);
      const std::span<const topology::LinkId> route = graph_.route(t);
      records.push_back(TransferRecord{send.rank,
                                       send.tb,
                                       send.step,
                                       recv.rank,
                                       network_.started_us[static_cast<std::size_t>(id)],
                                       arrival_[static_cast<std::size_t>(id)],
                                       t.fraction * size_,
                                       {route.begin(), route.end()}});
    }
    std::stable_sort(records.begin(), records.end(),
                     [](const auto& a, const auto& b) { return a.start_us < b.start_us; });
    return records;
  }

  const Simulator::Impl& impl_;
  const StepGraph& graph_;
  double size_;
  topology::Protocol protocol_;
  topology::ProtocolCosts costs_;
  const topology::RuntimeCosts* runtime_;  // a fitted machine's costs by message size, or null
  // Copies of the options the loop reads per step: members, so that stores into the per-step
  // arrays cannot make the compiler reload them.
  double overhead_us_;
  std::vector<double> core_free_;    // per rank, when its core is free; empty unless serial_steps
  std::vector<CoreWork> core_work_;  // per step, from core_work(); empty unless serial_steps
  std::int32_t slots_;
  Net network_;
  std::vector<topology::TransferCost> route_costs_;  // per route, under this run's protocol
  // What the loop writes of a step, in one place, like SimStep.
  struct StepState {
    double latest;         // when its last prerequisite so far was met
    double end;            // when it completed; -1 until then
    std::int32_t pending;  // prerequisites not yet met
    StepIndex cause;       // the step that met its latest prerequisite, -1 if none
  };
  StepState& state(StepIndex s) { return state_[static_cast<std::size_t>(s)]; }
  const StepState& state(StepIndex s) const { return state_[static_cast<std::size_t>(s)]; }
  std::vector<StepState> state_;
  struct Ready {
    std::uint64_t key;  // StepGraph::start_key: the order steps ready at one instant start in
    StepIndex step;
  };
  std::vector<Ready> ready_, starting_;    // the steps ready now
  std::vector<double> arrival_;            // per transfer, for the timeline only
  std::vector<std::int32_t> received_;     // per connection: receives completed
  std::vector<StepIndex> blocked_;         // per connection: the send waiting for a slot, or -1
  DelayLine<StepIndex> delayed_;           // steps starting once the per-step overhead has passed
  EventQueue<StepIndex> queued_for_core_;  // the same, when a rank's core pays them in turn
  std::size_t completed_ = 0;
  StepIndex last_ = -1;  // the step that finished last so far
  double last_end_ = 0;  // when it finished
};

}  // namespace

Simulator::Simulator(const topology::Topology& topology, const schedule::Schedule& schedule,
                     SimOptions options)
    : impl_(std::make_unique<Impl>(Impl{topology,
                                        schedule.collective,
                                        schedule.ranks,
                                        schedule.name,
                                        options,
                                        options.op_overhead_us.value_or(topology.op_overhead_us()),
                                        build_step_graph(topology, schedule),
                                        {},
                                        known_protocol(schedule, schedule.protocol),
                                        std::nullopt})) {
  if (options.model == Model::flow) impl_->flow_routes.emplace(topology, impl_->graph);
  for (const schedule::ProtocolRange& range : schedule.protocol_by_size)
    impl_->protocol_ranges.emplace_back(range.max_bytes, known_protocol(schedule, range.protocol));
  if (options.slots < 1)
    throw support::InputError(support::SourceLocation{schedule.name, 0, 0, "slots"},
                              "a connection needs at least one slot");
}
Simulator::~Simulator() = default;
Simulator::Simulator(Simulator&&) noexcept = default;
Simulator& Simulator::operator=(Simulator&&) noexcept = default;

SimResult Simulator::run(std::uint64_t size_bytes) const {
  if (impl_->options.model == Model::flow) return Run<FlowNetwork>(*impl_, size_bytes).execute();
  return Run<AlphaBetaNetwork>(*impl_, size_bytes).execute();
}

std::vector<SimResult> Simulator::sweep(std::span<const std::uint64_t> sizes) const {
  std::vector<SimResult> results;
  for (std::uint64_t size : sizes) results.push_back(run(size));
  return results;
}

}  // namespace optiflow::sim
