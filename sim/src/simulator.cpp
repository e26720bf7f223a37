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
};

namespace {

// One simulation at one size: the textbook loop over a time-ordered event queue.
class Run {
 public:
  Run(const Simulator::Impl& impl, std::uint64_t size_bytes)
      : impl_(impl),
        graph_(impl.graph),
        size_(static_cast<double>(size_bytes)),
        network_(impl.options.model == Model::flow
                     ? make_flow_network(impl.topology, graph_)
                     : make_alpha_beta_network(impl.topology, graph_)),
        pending_(graph_.steps.size()),
        end_(graph_.steps.size(), -1),
        latest_(graph_.steps.size(), 0),
        cause_(graph_.steps.size(), -1) {
    for (std::size_t s = 0; s < graph_.steps.size(); ++s) {
      pending_[s] = graph_.steps[s].prerequisites;
      if (pending_[s] == 0) ready_.push_back(static_cast<StepIndex>(s));
    }
  }

  SimResult execute() {
    double now = 0;
    std::vector<std::int32_t> arrived;
    while (true) {
      while (!ready_.empty()) {
        const StepIndex s = ready_.back();
        ready_.pop_back();
        start(s, now);
      }
      const double next = std::min(delayed_.empty() ? kNever : std::get<0>(delayed_.top()),
                                   network_->next_arrival());
      if (next == kNever) break;
      now = next;
      while (!delayed_.empty() && std::get<0>(delayed_.top()) <= now) {
        const auto [time, seq, step, launches] = delayed_.top();
        delayed_.pop();
        launches ? launch(step, now) : complete(step, now, -1);
      }
      arrived.clear();
      network_->take_arrivals(now, arrived);
      for (std::int32_t id : arrived) {
        const SimTransfer& t = graph_.transfers[static_cast<std::size_t>(id)];
        complete(t.send_step, now, -1);
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
      launch(s, now);
    } else {
      complete(s, now, -1);
    }
  }

  void launch(StepIndex s, double now) {
    const std::int32_t id = graph_.steps[static_cast<std::size_t>(s)].transfer;
    network_->launch(id, graph_.transfers[static_cast<std::size_t>(id)].fraction * size_, now);
  }

  void complete(StepIndex s, double now, StepIndex) {
    const SimStep& step = graph_.steps[static_cast<std::size_t>(s)];
    end_[static_cast<std::size_t>(s)] = now;
    if (step.next_in_tb >= 0) satisfy(step.next_in_tb, now, s);
    for (std::int32_t i = step.dependents_begin; i < step.dependents_end; ++i)
      satisfy(graph_.dependents[static_cast<std::size_t>(i)], now, s);
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
    StepIndex last = -1;
    for (std::size_t s = 0; s < graph_.steps.size(); ++s) {
      if (end_[s] < 0)
        throw support::InputError(support::SourceLocation{impl_.name, 0, 0, {}},
                                  "the simulation stalls: rank " +
                                      std::to_string(graph_.steps[s].rank) + " tb " +
                                      std::to_string(graph_.steps[s].tb) + " step " +
                                      std::to_string(graph_.steps[s].step) +
                                      " never runs (verify the schedule with `optiflow check`)");
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
          end_[static_cast<std::size_t>(t.send_step)],
          t.fraction * size_,
          {graph_.route_links.begin() + t.route_begin, graph_.route_links.begin() + t.route_end}});
    }
    std::stable_sort(records.begin(), records.end(),
                     [](const auto& a, const auto& b) { return a.start_us < b.start_us; });
    return records;
  }

  using Delayed = std::tuple<double, std::uint64_t, StepIndex, bool>;  // bool: launches a transfer
  const Simulator::Impl& impl_;
  const StepGraph& graph_;
  double size_;
  std::unique_ptr<Network> network_;
  std::vector<std::int32_t> pending_;
  std::vector<double> end_, latest_;
  std::vector<StepIndex> cause_, ready_;
  std::priority_queue<Delayed, std::vector<Delayed>, std::greater<>> delayed_;
  std::uint64_t sequence_ = 0;
};

}  // namespace

Simulator::Simulator(const topology::Topology& topology, const schedule::Schedule& schedule,
                     SimOptions options)
    : impl_(std::make_unique<Impl>(Impl{topology, schedule.collective, schedule.ranks,
                                        schedule.name, options,
                                        options.op_overhead_us.value_or(topology.op_overhead_us()),
                                        build_step_graph(topology, schedule)})) {}
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
