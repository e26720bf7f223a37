// The event loop: steps start when their prerequisites have completed; a step that sends
// completes when its data arrives; the network model decides when that is.
#include "optiflow/sim/simulator.hpp"

#include <algorithm>
#include <array>
#include <queue>
#include <tuple>

#include "network.hpp"
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

// One simulation at one size: the textbook loop over a time-ordered event queue. Time starts
// at the protocol's launch cost; a step starts when its prerequisites have completed; a send
// completes when a free slot of its connection takes its data, a receive when the data has
// arrived; the network model decides when that is.
class Run {
 public:
  Run(const Simulator::Impl& impl, std::uint64_t size_bytes)
      : impl_(impl),
        graph_(impl.graph),
        size_(static_cast<double>(size_bytes)),
        protocol_(impl.protocol_for(size_bytes)),
        costs_(impl.options.protocol_costs ? *impl.options.protocol_costs
                                           : topology::protocol_costs(protocol_)),
        network_(impl.options.model == Model::flow
                     ? make_flow_network(impl.topology, graph_)
                     : make_alpha_beta_network(impl.topology, graph_)),
        pending_(graph_.steps.size()),
        end_(graph_.steps.size(), -1),
        latest_(graph_.steps.size(), costs_.launch_us),
        cause_(graph_.steps.size(), -1),
        arrival_(impl.options.record_timeline ? graph_.transfers.size() : 0, 0),
        received_(static_cast<std::size_t>(graph_.connections), 0),
        blocked_(static_cast<std::size_t>(graph_.connections), -1) {
    for (std::size_t s = 0; s < graph_.steps.size(); ++s) {
      pending_[s] = graph_.steps[s].prerequisites;
      if (pending_[s] == 0) ready_.push_back(static_cast<StepIndex>(s));
    }
  }

  SimResult execute() {
    double now = costs_.launch_us;
    std::vector<std::int32_t> arrived;
    while (true) {
      while (!ready_.empty()) {
        starting_.swap(ready_);
        if (starting_.size() > 1) in_start_order(starting_);
        for (StepIndex s : starting_) start(s, now);
        starting_.clear();
      }
      const double next = std::min(delayed_.empty() ? kNever : std::get<0>(delayed_.top()),
                                   network_->next_arrival());
      if (next == kNever) break;
      now = next;
      while (!delayed_.empty() && std::get<0>(delayed_.top()) <= now) {
        const auto [time, seq, step, sends] = delayed_.top();
        delayed_.pop();
        sends ? hand_off_or_wait(step, now) : complete(step, now);
      }
      arrived.clear();
      network_->take_arrivals(now, arrived);
      for (std::int32_t id : arrived) {
        const SimTransfer& t = graph_.transfers[static_cast<std::size_t>(id)];
        if (!arrival_.empty()) arrival_[static_cast<std::size_t>(id)] = now;
        satisfy(t.recv_step, now, t.send_step);
      }
    }
    return result();
  }

 private:
  void start(StepIndex s, double now) {
    const bool sends = graph_.steps[static_cast<std::size_t>(s)].transfer >= 0;
    if (impl_.overhead_us > 0) {
      delayed_.push({now + impl_.overhead_us, sequence_++, s, sends});
    } else if (sends) {
      hand_off_or_wait(s, now);
    } else {
      complete(s, now);
    }
  }

  // Steps ready at one instant by (start_order, index): see SimStep::start_order.
  void in_start_order(std::vector<StepIndex>& steps) const {
    std::sort(steps.begin(), steps.end(), [&](StepIndex a, StepIndex b) {
      const std::int32_t oa = graph_.steps[static_cast<std::size_t>(a)].start_order;
      const std::int32_t ob = graph_.steps[static_cast<std::size_t>(b)].start_order;
      return oa < ob || (oa == ob && a < b);
    });
  }

  // A send takes a slot of its connection: the k-th message needs the (k - slots)-th received.
  bool has_slot(const SimTransfer& t) const {
    return t.message - received_[static_cast<std::size_t>(t.connection)] < impl_.options.slots;
  }

  void hand_off_or_wait(StepIndex s, double now) {
    const std::int32_t id = graph_.steps[static_cast<std::size_t>(s)].transfer;
    const SimTransfer& t = graph_.transfers[static_cast<std::size_t>(id)];
    if (!has_slot(t)) {
      blocked_[static_cast<std::size_t>(t.connection)] = s;
      return;
    }
    network_->launch(id, t.fraction * size_, topology::transfer_cost(t.cost, costs_), now);
    complete(s, now);
  }

  void complete(StepIndex s, double now) {
    const SimStep& step = graph_.steps[static_cast<std::size_t>(s)];
    end_[static_cast<std::size_t>(s)] = now;
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
    const auto i = static_cast<std::size_t>(s);
    if (now >= latest_[i]) {
      latest_[i] = now;
      cause_[i] = cause;
    }
    if (--pending_[i] == 0) ready_.push_back(s);
  }

  SimResult result() const {
    SimResult r;
    r.size_bytes = static_cast<std::uint64_t>(size_);
    r.protocol = protocol_;
    StepIndex last = -1;
    for (std::size_t s = 0; s < graph_.steps.size(); ++s) {
      if (end_[s] < 0) stalled(static_cast<StepIndex>(s));
      if (last < 0 || end_[s] > end_[static_cast<std::size_t>(last)])
        last = static_cast<StepIndex>(s);
    }
    r.time_us = last < 0 ? 0 : end_[static_cast<std::size_t>(last)];
    if (r.time_us > 0) {
      r.algbw_GBps = support::GBps_of(size_, r.time_us);
      r.busbw_GBps = r.algbw_GBps * support::busbw_factor(impl_.collective, impl_.ranks);
    }
    for (StepIndex s = last; s >= 0; s = cause_[static_cast<std::size_t>(s)]) {
      const SimStep& step = graph_.steps[static_cast<std::size_t>(s)];
      r.critical_path.push_back(CriticalStep{step.rank, step.tb, step.step, step.kind,
                                             latest_[static_cast<std::size_t>(s)],
                                             end_[static_cast<std::size_t>(s)]});
    }
    std::reverse(r.critical_path.begin(), r.critical_path.end());
    const std::vector<double>& bytes = network_->link_bytes();
    for (topology::LinkId l = 0; l < bytes.size(); ++l) {
      if (bytes[l] == 0) continue;
      const double capacity = support::bytes_per_us(impl_.topology.link(l).bw_GBps) * r.time_us;
      r.links.push_back(LinkUsage{l, network_->link_busy_us()[l], bytes[l],
                                  capacity > 0 ? bytes[l] / capacity : 0});
    }
    if (impl_.options.record_timeline) r.timeline = timeline();
    return r;
  }

  // The first step that never ran: a send still waiting for a slot is the schedule holding
  // more messages in flight than a connection has (the verifier assumes unbounded FIFOs).
  [[noreturn]] void stalled(StepIndex s) const {
    std::string waits;
    for (StepIndex blocked : blocked_) {
      if (blocked < 0) continue;
      const SimStep& send = graph_.steps[static_cast<std::size_t>(blocked)];
      waits = "; rank " + std::to_string(send.rank) + " tb " + std::to_string(send.tb) + " step " +
              std::to_string(send.step) + " waits for a slot: its connection holds " +
              std::to_string(impl_.options.slots) + " steps in flight, as NCCL's do";
      break;
    }
    const SimStep& step = graph_.steps[static_cast<std::size_t>(s)];
    throw support::InputError(
        support::SourceLocation{impl_.name, 0, 0, {}},
        "the simulation stalls: rank " + std::to_string(step.rank) + " tb " +
            std::to_string(step.tb) + " step " + std::to_string(step.step) + " never runs" +
            (waits.empty() ? " (verify the schedule with `optiflow check`)" : waits));
  }

  std::vector<TransferRecord> timeline() const {
    std::vector<TransferRecord> records;
    for (std::size_t id = 0; id < graph_.transfers.size(); ++id) {
      const SimTransfer& t = graph_.transfers[id];
      const SimStep& send = graph_.steps[static_cast<std::size_t>(t.send_step)];
      const SimStep& recv = graph_.steps[static_cast<std::size_t>(t.recv_step)];
      records.push_back(TransferRecord{
          send.rank,
          send.tb,
          send.step,
          recv.rank,
          network_->started_us[id],
          arrival_[id],
          t.fraction * size_,
          {graph_.route_links.begin() + t.route_begin, graph_.route_links.begin() + t.route_end}});
    }
    std::stable_sort(records.begin(), records.end(),
                     [](const auto& a, const auto& b) { return a.start_us < b.start_us; });
    return records;
  }

  using Delayed = std::tuple<double, std::uint64_t, StepIndex, bool>;  // bool: it sends
  const Simulator::Impl& impl_;
  const StepGraph& graph_;
  double size_;
  topology::Protocol protocol_;
  topology::ProtocolCosts costs_;
  std::unique_ptr<Network> network_;
  std::vector<std::int32_t> pending_;
  std::vector<double> end_, latest_;
  std::vector<StepIndex> cause_, ready_;
  std::vector<StepIndex> starting_;     // the ready steps being started at one instant
  std::vector<double> arrival_;         // per transfer, for the timeline only
  std::vector<std::int32_t> received_;  // per connection: receives completed
  std::vector<StepIndex> blocked_;      // per connection: the send waiting for a slot, or -1
  std::priority_queue<Delayed, std::vector<Delayed>, std::greater<>> delayed_;
  std::uint64_t sequence_ = 0;
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
                                        known_protocol(schedule, schedule.protocol)})) {
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
  return Run(*impl_, size_bytes).execute();
}

std::vector<SimResult> Simulator::sweep(std::span<const std::uint64_t> sizes) const {
  std::vector<SimResult> results;
  for (std::uint64_t size : sizes) results.push_back(run(size));
  return results;
}

}  // namespace optiflow::sim
