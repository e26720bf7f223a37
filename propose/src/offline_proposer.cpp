// The offline proposer: templates first, then mutation and crossover on the syntax tree.
#include <algorithm>
#include <array>
#include <functional>
#include <random>

#include "optiflow/dsl/parser.hpp"
#include "optiflow/propose/proposer.hpp"
#include "templates.hpp"

namespace optiflow::propose {
namespace {

using dsl::Block;
using dsl::Expr;
using dsl::GroupSpec;
using dsl::Pattern;
using dsl::Program;
using dsl::Statement;

// Deterministic choices that do not depend on the standard library's distributions.
class Dice {
 public:
  explicit Dice(std::uint64_t seed) : engine_(seed) {}
  std::size_t below(std::size_t n) { return n == 0 ? 0 : static_cast<std::size_t>(engine_() % n); }
  bool chance(int percent) { return below(100) < static_cast<std::size_t>(percent); }
  template <typename T>
  const T& pick(const std::vector<T>& items) {
    return items[below(items.size())];
  }

 private:
  std::mt19937_64 engine_;
};

Expr number(std::int64_t value) {
  return Expr::make_number(support::Rational(value));
}

void collect(Block& block, std::vector<Statement*>& out,
             const std::function<bool(const Statement&)>& keep) {
  for (Statement& s : block) {
    if (keep(s)) out.push_back(&s);
    if (auto* split = s.get_if<dsl::SplitEven>()) collect(split->body, out, keep);
    if (auto* split = s.get_if<dsl::SplitWeighted>())
      for (auto& branch : split->branches) collect(branch.body, out, keep);
  }
}

std::vector<Statement*> steps_of(Program& p) {
  std::vector<Statement*> out;
  collect(p.body, out, [](const Statement& s) { return s.is<dsl::Step>(); });
  return out;
}

dsl::Step& step(Statement* s) {
  return std::get<dsl::Step>(s->node);
}

// Steps whose pattern has a direction to reverse (a packing has none).
std::vector<Statement*> directed_steps_of(Program& p) {
  std::vector<Statement*> out;
  collect(p.body, out, [](const Statement& s) {
    const auto* st = s.get_if<dsl::Step>();
    return st && st->pattern != Pattern::pack;
  });
  return out;
}

// The top-level `pipeline` or `channels` statement (dsl::Pipeline, dsl::Channels).
template <typename Setting>
Setting* setting(Program& p) {
  for (Statement& s : p.body)
    if (auto* found = s.get_if<Setting>()) return found;
  return nullptr;
}

template <typename Setting>
void set_setting(Program& p, std::int64_t value) {
  if (Setting* s = setting<Setting>(p)) {
    s->value = number(value);
    return;
  }
  p.body.insert(p.body.begin(), Statement{Setting{number(value)}, {}});
}

template <typename Setting>
std::int64_t setting_value(Program& p) {
  const Setting* s = setting<Setting>(p);
  return s && s->value.kind == Expr::Kind::number && s->value.number.is_integer()
             ? s->value.number.num()
             : 1;
}

bool is_setting(const Statement& s) {
  return s.is<dsl::Pipeline>() || s.is<dsl::Channels>();
}

// --- mutations: each returns false when it does not apply to this program ------------------

bool mutate_pipeline(Program& p, Dice& dice) {
  const std::int64_t now = setting_value<dsl::Pipeline>(p);
  const std::vector<std::int64_t> options{1, 2, 4, 8, 16};
  std::int64_t next = dice.pick(options);
  if (next == now) next = now >= 16 ? 8 : now * 2;
  set_setting<dsl::Pipeline>(p, next);
  return true;
}

bool mutate_channels(Program& p, Dice& dice) {
  set_setting<dsl::Channels>(p, dice.pick(std::vector<std::int64_t>{1, 2, 4}));
  return true;
}

bool mutate_pattern(Program& p, Dice& dice) {
  auto steps = steps_of(p);
  if (steps.empty()) return false;
  static const std::vector<Pattern> kPatterns{
      Pattern::ring,   Pattern::direct, Pattern::binomial, Pattern::bruck, Pattern::rd,
      Pattern::binary, Pattern::dbtree, Pattern::kary,     Pattern::chain, Pattern::bfs};
  dsl::Step& s = step(steps[dice.below(steps.size())]);
  s.pattern = dice.pick(kPatterns);
  s.arity = s.pattern == Pattern::kary ? static_cast<int>(2 + dice.below(7)) : 0;
  return true;
}

bool mutate_reverse(Program& p, Dice& dice) {
  auto steps = directed_steps_of(p);
  if (steps.empty()) return false;
  dsl::Step& s = step(steps[dice.below(steps.size())]);
  s.reverse = !s.reverse;
  return true;
}

bool mutate_groups(Program& p, Dice& dice) {
  auto steps = steps_of(p);
  if (steps.empty()) return false;
  dsl::Step& s = step(steps[dice.below(steps.size())]);
  s.groups = GroupSpec{};
  s.groups.kind = dice.pick(std::vector<GroupSpec::Kind>{
      GroupSpec::Kind::all, GroupSpec::Kind::hosts, GroupSpec::Kind::rails});
  return true;
}

// Scales one numeric literal inside a weight by 4/5 or 5/4.
bool mutate_weights(Program& p, Dice& dice) {
  std::vector<Expr*> literals;
  std::function<void(Expr&)> find = [&](Expr& e) {
    if (e.kind == Expr::Kind::number && e.number > support::Rational(0)) literals.push_back(&e);
    for (Expr& a : e.args) find(a);
  };
  std::vector<Statement*> splits;
  collect(p.body, splits, [](const Statement& s) { return s.is<dsl::SplitWeighted>(); });
  for (Statement* s : splits)
    for (auto& branch : s->get_if<dsl::SplitWeighted>()->branches) find(branch.weight);
  if (literals.empty()) return false;
  Expr& e = *literals[dice.below(literals.size())];
  const auto factor =
      dice.chance(50) ? support::Rational::make(4, 5) : support::Rational::make(5, 4);
  const auto scaled = support::mul(e.number, *factor);
  if (!scaled || scaled->den() > 1000) return false;
  e.number = *scaled;
  return true;
}

bool mutate_order(Program& p, Dice& dice) {
  std::vector<Block*> blocks{&p.body};
  std::vector<Statement*> nested;
  collect(p.body, nested, [](const Statement&) { return true; });
  for (Statement* s : nested) {
    if (auto* split = s->get_if<dsl::SplitEven>(); split && !split->body.empty())
      blocks.push_back(&split->body);
    if (auto* split = s->get_if<dsl::SplitWeighted>())
      for (auto& b : split->branches) blocks.push_back(&b.body);
  }
  Block& block = *blocks[dice.below(blocks.size())];
  std::vector<std::size_t> swappable;
  for (std::size_t i = 0; i + 1 < block.size(); ++i)
    if (block[i].is<dsl::Step>() && block[i + 1].is<dsl::Step>()) swappable.push_back(i);
  if (swappable.empty()) return false;
  const std::size_t i = dice.pick(swappable);
  std::swap(block[i], block[i + 1]);
  return true;
}

// One step becomes two halves going opposite ways: load on both directions of every link.
bool mutate_bidirectional(Program& p, Dice& dice) {
  auto steps = directed_steps_of(p);
  if (steps.empty()) return false;
  Statement& s = *steps[dice.below(steps.size())];
  Statement forward = s, backward = s;
  step(&backward).reverse = !step(&backward).reverse;
  s = Statement{dsl::SplitWeighted{{{number(1), {forward}}, {number(1), {backward}}}}, {}};
  return true;
}

// Guided by the parent: keep a share of the data away from its busiest link.
bool mutate_avoid_busiest(Program& p, Dice& dice, const Parent& parent) {
  if (parent.busiest_links.empty()) return false;
  const LinkNote& link =
      parent.busiest_links[dice.below(std::min<std::size_t>(2, parent.busiest_links.size()))];
  const Statement avoid{dsl::Avoid{{{link.from, link.to, false}}}, {}};
  const Statement tree{dsl::Step{Pattern::bfs, 0, {}, false}, {}};
  Block settings, rest;
  for (Statement& s : p.body) (is_setting(s) ? settings : rest).push_back(s);
  settings.push_back(Statement{
      dsl::SplitWeighted{{{number(4), std::move(rest)}, {number(1), {avoid, tree}}}}, {}});
  p.body = std::move(settings);
  return true;
}

// Small buffers want few rounds; large ones want pipelining.
bool mutate_for_weakest_size(Program& p, Dice& dice, const Parent& parent) {
  if (parent.results.size() < 2) return false;
  const auto worst =
      std::max_element(parent.results.begin(), parent.results.end(),
                       [](const auto& a, const auto& b) { return a.x_bound() < b.x_bound(); });
  if (worst - parent.results.begin() >= static_cast<std::ptrdiff_t>(parent.results.size() / 2))
    return mutate_pipeline(p, dice);
  auto steps = steps_of(p);
  if (steps.empty()) return false;
  step(steps[dice.below(steps.size())]).pattern = dice.chance(50) ? Pattern::bruck : Pattern::rd;
  return true;
}

Program crossover(Program a, Program b, Dice& dice) {
  Block settings, body_a, body_b;
  for (Statement& s : a.body) (is_setting(s) ? settings : body_a).push_back(s);
  for (Statement& s : b.body)
    if (!is_setting(s)) body_b.push_back(s);
  Program child;
  child.body = std::move(settings);
  if (dice.chance(50) && !body_a.empty() && !body_b.empty()) {
    // First half of one, second half of the other: e.g. A's inter-host phase, B's intra-host.
    Block joined(body_a.begin(),
                 body_a.begin() + static_cast<std::ptrdiff_t>((body_a.size() + 1) / 2));
    joined.insert(joined.end(), body_b.begin() + static_cast<std::ptrdiff_t>(body_b.size() / 2),
                  body_b.end());
    child.body.insert(child.body.end(), joined.begin(), joined.end());
  } else {
    // Both at once, each carrying part of the data.
    child.body.push_back(
        Statement{dsl::SplitWeighted{
                      {{number(1 + static_cast<std::int64_t>(dice.below(3))), std::move(body_a)},
                       {number(1), std::move(body_b)}}},
                  {}});
  }
  return child;
}

class OfflineProposer final : public Proposer {
 public:
  explicit OfflineProposer(ProposalContext context) : context_(std::move(context)) {}

  std::string name() const override { return "offline"; }

  std::vector<Proposal> initial_programs() override {
    std::vector<Proposal> proposals;
    for (std::string& source : template_programs(context_))
      proposals.push_back({std::move(source), name()});
    return proposals;
  }

  std::vector<std::vector<Proposal>> propose(std::span<const ProposalRequest> requests) override {
    std::vector<std::vector<Proposal>> proposals;
    for (const ProposalRequest& request : requests)
      proposals.push_back({Proposal{mutate_or_combine(request), name()}});
    return proposals;
  }

 private:
  std::string mutate_or_combine(const ProposalRequest& request) const {
    Dice dice(request.seed);
    Program program = parse(request.parents.front().source);
    if (request.parents.size() > 1) {
      program = crossover(std::move(program), parse(request.parents[1].source), dice);
      if (dice.chance(50)) return dsl::print_program(program);
    }
    const Parent& parent = request.parents.front();
    using Mutation = std::function<bool(Program&, Dice&)>;
    const std::vector<Mutation> mutations{
        mutate_pipeline,
        mutate_channels,
        mutate_pattern,
        mutate_reverse,
        mutate_groups,
        mutate_weights,
        mutate_order,
        mutate_bidirectional,
        [&](Program& p, Dice& d) { return mutate_avoid_busiest(p, d, parent); },
        [&](Program& p, Dice& d) { return mutate_for_weakest_size(p, d, parent); }};
    const std::size_t rounds = 1 + dice.below(2);
    for (std::size_t done = 0, attempts = 0; done < rounds && attempts < 20; ++attempts)
      if (mutations[dice.below(mutations.size())](program, dice)) ++done;
    return dsl::print_program(program);
  }

  static Program parse(const std::string& source) {
    try {
      return dsl::parse_program(source, "parent");
    } catch (const support::InputError&) {
      return dsl::parse_program("ring over all\n", "fallback");
    }
  }

  ProposalContext context_;
};

}  // namespace

std::unique_ptr<Proposer> make_offline_proposer(const ProposalContext& context) {
  return std::make_unique<OfflineProposer>(context);
}

}  // namespace optiflow::propose
