#include "optiflow/topology/variation.hpp"

#include <algorithm>
#include <cmath>
#include <functional>
#include <map>
#include <optional>

#include "optiflow/support/error.hpp"
#include "optiflow/support/strings.hpp"

namespace optiflow::topology {
namespace {

// splitmix64: the same stream on every platform and standard library.
class Dice {
 public:
  explicit Dice(std::uint64_t seed) : state_(seed) {}
  std::uint64_t next() {
    std::uint64_t z = (state_ += 0x9e3779b97f4a7c15ULL);
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ULL;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebULL;
    return z ^ (z >> 31);
  }
  std::size_t below(std::size_t n) { return static_cast<std::size_t>(next() % n); }
  /// Uniform in [lo, hi), rounded to hundredths so that the faults read as they are.
  double between(double lo, double hi) {
    const double u = static_cast<double>(next() >> 11) * 0x1.0p-53;
    return std::round((lo + (hi - lo) * u) * 100) / 100;
  }

 private:
  std::uint64_t state_;
};

// The topology being varied: its links with their current bandwidth, and what is gone.
class Draft {
 public:
  explicit Draft(const Topology& base)
      : base_(&base),
        bw_(base.link_count()),
        link_gone_(base.link_count(), 0),
        node_gone_(base.node_count(), 0) {
    for (LinkId l = 0; l < base.link_count(); ++l) bw_[l] = base.link(l).bw_GBps;
  }

  const Topology& base() const { return *base_; }
  bool gone(LinkId l) const { return link_gone_[l] != 0; }
  double bw(LinkId l) const { return bw_[l]; }

  /// Each connection once: a link and, when there is one, its way back (same kind).
  std::vector<std::pair<LinkId, std::optional<LinkId>>> connections() const {
    std::vector<std::pair<LinkId, std::optional<LinkId>>> out;
    for (LinkId l = 0; l < base_->link_count(); ++l) {
      if (gone(l)) continue;
      const Link& link = base_->link(l);
      std::optional<LinkId> back;
      for (LinkId r : base_->out_links(link.dst))
        if (!gone(r) && base_->link(r).dst == link.src && base_->link(r).kind == link.kind) back = r;
      if (back && *back < l) continue;  // listed with its other way
      out.emplace_back(l, back);
    }
    return out;
  }

  void scale(LinkId l, double factor) { bw_[l] *= factor; }
  void remove_link(LinkId l) { link_gone_[l] = 1; }
  void restore_link(LinkId l) { link_gone_[l] = 0; }
  void remove_node(NodeId v) {
    node_gone_[v] = 1;
    for (LinkId l : base_->out_links(v)) link_gone_[l] = 1;
    for (LinkId l : base_->in_links(v)) link_gone_[l] = 1;
  }
  bool node_gone(NodeId v) const { return node_gone_[v] != 0; }

  /// Whether every GPU left reaches every other (over any nodes: GPUs relay in a schedule).
  bool gpus_connected() const {
    std::vector<NodeId> gpus;
    for (NodeId g : base_->gpus_by_rank())
      if (!node_gone(g)) gpus.push_back(g);
    if (gpus.empty()) return false;
    for (bool forward : {true, false}) {
      std::vector<char> seen(base_->node_count(), 0);
      std::vector<NodeId> stack{gpus.front()};
      seen[gpus.front()] = 1;
      while (!stack.empty()) {
        const NodeId v = stack.back();
        stack.pop_back();
        for (LinkId l : forward ? base_->out_links(v) : base_->in_links(v)) {
          if (gone(l)) continue;
          const NodeId w = forward ? base_->link(l).dst : base_->link(l).src;
          if (!seen[w]) {
            seen[w] = 1;
            stack.push_back(w);
          }
        }
      }
      if (!std::all_of(gpus.begin(), gpus.end(), [&](NodeId g) { return seen[g] != 0; }))
        return false;
    }
    return true;
  }

  Topology build(const std::string& name) const {
    Topology out(name);
    out.set_op_overhead_us(base_->op_overhead_us());
    out.set_gpu_sm(base_->gpu_sm());
    out.set_runtime(base_->runtime());
    std::vector<NodeId> new_id(base_->node_count());
    int rank = 0;
    std::map<int, NodeId> by_rank;  // old rank -> old node, so that ranks stay in order
    for (NodeId v = 0; v < base_->node_count(); ++v)
      if (!node_gone(v) && base_->node(v).kind == NodeKind::gpu) by_rank[base_->node(v).rank] = v;
    std::vector<int> new_rank(base_->node_count(), -1);
    for (const auto& [old_rank, v] : by_rank) new_rank[v] = rank++;
    for (NodeId v = 0; v < base_->node_count(); ++v) {
      if (node_gone(v)) continue;
      Node node = base_->node(v);
      if (node.kind == NodeKind::gpu) node.rank = new_rank[v];
      new_id[v] = out.add_node(std::move(node));
    }
    for (LinkId l = 0; l < base_->link_count(); ++l) {
      if (gone(l)) continue;
      const Link& link = base_->link(l);
      out.add_link(new_id[link.src], new_id[link.dst], LinkSpec{link.kind, bw_[l], link.alpha_us});
    }
    out.validate(name);
    return out;
  }

 private:
  const Topology* base_;
  std::vector<double> bw_;
  std::vector<char> link_gone_, node_gone_;
};

std::string ends(const Topology& t, LinkId l, bool both) {
  return t.node(t.link(l).src).id + (both ? " <-> " : " -> ") + t.node(t.link(l).dst).id;
}

bool is_kind(const Topology& t, NodeId v, NodeKind k) { return t.node(v).kind == k; }

// One fault of `kind`, or nothing when the draft has no place for it.
std::optional<std::string> draw(Draft& d, FaultKind kind, Dice& dice) {
  const Topology& t = d.base();
  const auto connections = d.connections();
  auto pick_connection = [&](const std::function<bool(const Link&)>& fits)
      -> std::optional<std::pair<LinkId, std::optional<LinkId>>> {
    std::vector<std::pair<LinkId, std::optional<LinkId>>> candidates;
    for (const auto& c : connections)
      if (fits(t.link(c.first)) && d.bw(c.first) == t.link(c.first).bw_GBps)
        candidates.push_back(c);  // not already degraded
    if (candidates.empty()) return std::nullopt;
    return candidates[dice.below(candidates.size())];
  };
  auto slow = [&](const std::pair<LinkId, std::optional<LinkId>>& c, double fraction) {
    d.scale(c.first, fraction);
    if (c.second) d.scale(*c.second, fraction);
    return support::strprintf("%s at %.2f of %g GB/s",
                              ends(t, c.first, c.second.has_value()).c_str(), fraction,
                              t.link(c.first).bw_GBps);
  };
  switch (kind) {
    case FaultKind::slow_nic: {
      const auto c = pick_connection([&](const Link& l) {
        return (is_kind(t, l.src, NodeKind::nic) && is_kind(t, l.dst, NodeKind::switch_)) ||
               (is_kind(t, l.dst, NodeKind::nic) && is_kind(t, l.src, NodeKind::switch_));
      });
      if (!c) return std::nullopt;
      return slow(*c, dice.between(0.10, 0.75));
    }
    case FaultKind::slow_nvlink: {
      const auto c = pick_connection([&](const Link& l) {
        return (l.kind == LinkKind::nvlink || l.kind == LinkKind::nvswitch) &&
               (is_kind(t, l.src, NodeKind::gpu) || is_kind(t, l.dst, NodeKind::gpu));
      });
      if (!c) return std::nullopt;
      return slow(*c, dice.between(0.25, 0.75));
    }
    case FaultKind::failed_link: {
      std::vector<std::pair<LinkId, std::optional<LinkId>>> candidates = connections;
      while (!candidates.empty()) {
        const std::size_t i = dice.below(candidates.size());
        const auto [l, back] = candidates[i];
        candidates.erase(candidates.begin() + static_cast<std::ptrdiff_t>(i));
        d.remove_link(l);
        if (back) d.remove_link(*back);
        if (d.gpus_connected()) return "failed: " + ends(t, l, back.has_value());
        d.restore_link(l);
        if (back) d.restore_link(*back);
      }
      return std::nullopt;
    }
    case FaultKind::oversubscribed: {
      std::vector<LinkId> spine;
      for (LinkId l = 0; l < t.link_count(); ++l)
        if (!d.gone(l) && is_kind(t, t.link(l).src, NodeKind::switch_) &&
            is_kind(t, t.link(l).dst, NodeKind::switch_) && d.bw(l) == t.link(l).bw_GBps)
          spine.push_back(l);
      if (spine.empty()) return std::nullopt;
      const int ratio = dice.below(2) == 0 ? 2 : 4;
      for (LinkId l : spine) d.scale(l, 1.0 / ratio);
      return support::strprintf("%zu links between switches oversubscribed %d:1", spine.size(), ratio);
    }
    case FaultKind::missing_gpu: {
      std::map<int, std::vector<NodeId>> by_host;
      for (NodeId g : t.gpus_by_rank())
        if (!d.node_gone(g) && t.node(g).host >= 0) by_host[t.node(g).host].push_back(g);
      std::vector<NodeId> candidates;
      for (const auto& [host, gpus] : by_host)
        if (gpus.size() > 2) candidates.insert(candidates.end(), gpus.begin(), gpus.end());
      while (!candidates.empty()) {
        const std::size_t i = dice.below(candidates.size());
        const NodeId gpu = candidates[i];
        candidates.erase(candidates.begin() + static_cast<std::ptrdiff_t>(i));
        Draft trial = d;
        trial.remove_node(gpu);
        // A NIC no GPU uses any more goes with it.
        for (LinkId l : t.out_links(gpu)) {
          const NodeId nic = t.link(l).dst;
          if (!is_kind(t, nic, NodeKind::nic)) continue;
          bool used = false;
          for (LinkId m : t.in_links(nic))
            used |= !trial.gone(m) && is_kind(t, t.link(m).src, NodeKind::gpu);
          if (!used) trial.remove_node(nic);
        }
        if (!trial.gpus_connected()) continue;
        d = trial;
        return "missing: " + t.node(gpu).id;
      }
      return std::nullopt;
    }
  }
  return std::nullopt;
}

constexpr FaultKind kKinds[] = {FaultKind::slow_nic, FaultKind::slow_nvlink,
                                FaultKind::failed_link, FaultKind::oversubscribed,
                                FaultKind::missing_gpu};

}  // namespace

std::string_view to_string(FaultKind kind) {
  switch (kind) {
    case FaultKind::slow_nic: return "slow NIC";
    case FaultKind::slow_nvlink: return "slow NVLink";
    case FaultKind::failed_link: return "failed link";
    case FaultKind::oversubscribed: return "oversubscribed spine";
    case FaultKind::missing_gpu: return "missing GPU";
  }
  return "?";
}

Variation draw_faults(const Topology& base, std::uint64_t seed, int faults) {
  const std::string name = base.name() + "-vary-s" + std::to_string(seed) + "-k" +
                           std::to_string(faults);
  if (faults < 0)
    throw support::InputError(support::SourceLocation{base.name(), 0, 0, "faults"},
                              "the number of faults must be at least 0");
  Dice dice(seed);
  Draft draft(base);
  Variation out;
  for (int k = 0; k < faults; ++k) {
    // Kinds in a drawn order; the first that has a place on the draft is this fault.
    std::vector<FaultKind> kinds(std::begin(kKinds), std::end(kKinds));
    std::optional<Fault> fault;
    while (!kinds.empty() && !fault) {
      const std::size_t i = dice.below(kinds.size());
      const FaultKind kind = kinds[i];
      kinds.erase(kinds.begin() + static_cast<std::ptrdiff_t>(i));
      if (auto what = draw(draft, kind, dice)) fault = Fault{kind, *what};
    }
    if (!fault)
      throw support::InputError(support::SourceLocation{base.name(), 0, 0, "faults"},
                                "only " + std::to_string(k) + " of " + std::to_string(faults) +
                                    " faults fit on " + base.name());
    out.faults.push_back(std::move(*fault));
  }
  out.topology = draft.build(name);
  return out;
}

}  // namespace optiflow::topology
