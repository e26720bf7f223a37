#include "optiflow/llm/llm_proposer.hpp"

#include <chrono>
#include <optional>

#include "optiflow/db/store.hpp"
#include "optiflow/llm/chat_client.hpp"
#include "optiflow/llm/prompts.hpp"
#include "optiflow/llm/reply_parser.hpp"
#include "optiflow/support/parallel.hpp"

namespace optiflow::llm {
namespace {

using propose::Proposal;
using propose::ProposerError;

constexpr std::size_t kMaxFailedReplyBytes = 4096;  // prose kept as a failed candidate

// One call to make: the request, why, and the seed it was asked with (before its position in
// the run makes it a sample of its own).
struct Call {
  std::string purpose;  // "initial" | "propose" | "repair"
  ChatRequest request;
  std::uint64_t seed = 0;
};

// What came back, and where it is recorded.
struct Outcome {
  std::optional<ChatReply> reply;  // nullopt: the call failed (error says why)
  std::string error;
  double latency_ms = 0;
  bool cached = false;
  std::int64_t call_id = 0;
};

class LlmProposer final : public propose::Proposer {
 public:
  LlmProposer(const propose::ProposalContext& context, const LlmSettings& settings,
              const std::string& db_path)
      : context_(context),
        settings_(settings),
        client_(settings.server),
        store_(db::Store::open(db_path)),
        system_(system_prompt(context.collective, settings.candidates_per_call)),
        header_(task_header(context)),
        own_(store_.model_calls(context.run_id)) {
    validate(settings_);
  }

  std::string name() const override { return "llm"; }

  std::size_t proposals_per_request() const override {
    return static_cast<std::size_t>(settings_.candidates_per_call);
  }

  std::vector<Proposal> initial_programs() override {
    const std::vector<Outcome> outcomes = call_all({make_call(
        "initial", initial_prompt(header_, settings_.candidates_per_call), context_.seed)});
    return proposals_of(outcomes.front());
  }

  std::vector<std::vector<Proposal>> propose(
      std::span<const propose::ProposalRequest> requests) override {
    std::vector<Call> calls;
    for (const propose::ProposalRequest& r : requests)
      calls.push_back(make_call(
          "propose", improve_prompt(header_, context_, r, settings_.candidates_per_call), r.seed));
    std::vector<std::vector<Proposal>> proposals;
    for (const Outcome& outcome : call_all(calls)) proposals.push_back(proposals_of(outcome));
    return proposals;
  }

  std::vector<std::optional<Proposal>> repair(
      std::span<const propose::Rejection> rejected) override {
    std::vector<std::optional<Proposal>> repaired(rejected.size());
    if (!stop_reason().empty()) return repaired;
    std::vector<Call> calls;
    std::vector<std::size_t> where;
    for (std::size_t i = 0; i < rejected.size(); ++i) {
      if (rejected[i].proposal.origin != name()) continue;
      calls.push_back(make_call("repair", repair_prompt(header_, rejected[i]),
                                seed_of(rejected[i].proposal.source)));
      where.push_back(i);
    }
    const std::vector<Outcome> outcomes = call_all(calls);
    for (std::size_t k = 0; k < outcomes.size(); ++k) {
      if (!outcomes[k].reply) continue;
      const ExtractedPrograms found =
          extract_programs(outcomes[k].reply->text, outcomes[k].reply->finish_reason);
      if (!found.programs.empty())
        repaired[where[k]] = Proposal{found.programs.front(), name(), outcomes[k].call_id};
    }
    return repaired;
  }

  std::string stop_reason() const override {
    const db::ModelCallTotals totals = store_.model_call_totals(context_.run_id);
    const std::int64_t tokens = totals.prompt_tokens + totals.completion_tokens;
    if (settings_.max_total_tokens > 0 && tokens >= settings_.max_total_tokens)
      return "the token budget is spent (" + std::to_string(tokens) + " of " +
             std::to_string(settings_.max_total_tokens) + " tokens)";
    if (settings_.max_cost > 0 && totals.cost >= settings_.max_cost)
      return "the cost budget is spent (" + std::to_string(totals.cost) + " of " +
             std::to_string(settings_.max_cost) + ")";
    return {};
  }

 private:
  // A seed for requests that have none of their own (a repair): from what they are about.
  std::uint64_t seed_of(const std::string& text) const {
    return context_.seed ^ std::stoull(db::content_hash(text), nullptr, 16);
  }

  // The model for a request, drawn by weight from its seed.
  const ModelSpec& model_for(std::uint64_t seed) const {
    double total = 0;
    for (const ModelSpec& m : settings_.models) total += m.weight;
    const double u = static_cast<double>(seed >> 11) * 0x1.0p-53 * total;
    double sum = 0;
    for (const ModelSpec& m : settings_.models)
      if (u < (sum += m.weight)) return m;
    return settings_.models.back();
  }

  Call make_call(std::string purpose, std::string prompt, std::uint64_t seed) const {
    ChatRequest request;
    request.model = model_for(seed).name;
    request.messages = {{"system", system_}, {"user", std::move(prompt)}};
    request.temperature = settings_.temperature;
    request.max_tokens = settings_.max_tokens;
    request.use_max_completion_tokens = settings_.use_max_completion_tokens;
    return Call{std::move(purpose), std::move(request), seed};
  }

  // What identifies call number `position` of a run: its body, which holds its seed; without
  // a seed sent, the position stands in for it.
  std::string request_key(const std::string& body, std::int64_t position) const {
    return db::content_hash(settings_.send_seed ? body
                                                : body + "\n#call " + std::to_string(position));
  }

  static Outcome outcome_of(const db::ModelCall& recorded) {
    Outcome outcome;
    if (recorded.error.empty())
      outcome.reply = ChatReply{recorded.response, recorded.finish_reason, recorded.prompt_tokens,
                                recorded.completion_tokens};
    outcome.error = recorded.error;
    outcome.cached = true;
    return outcome;
  }

  // A resumed run's own answer to call `position`, as recorded when it first made it.
  std::optional<Outcome> own_answer(std::int64_t position, const std::string& hash) const {
    if (position >= static_cast<std::int64_t>(own_.size())) return std::nullopt;
    const db::ModelCall& recorded = own_[static_cast<std::size_t>(position)];
    const std::string run = "run " + std::to_string(context_.run_id);
    if (recorded.request_hash != hash)
      throw ProposerError(run + " cannot be resumed: its model call " +
                          std::to_string(position + 1) +
                          " was another request (the code or the settings changed?)");
    if (!recorded.text_stored)
      throw ProposerError(run + " cannot be resumed: its model calls were stored as hashes only");
    Outcome outcome = outcome_of(recorded);
    outcome.cached = recorded.cached;
    outcome.call_id = recorded.id;
    return outcome;
  }

  // Replaying only: call `position` answered as the recorded run made it. The recorded run is
  // the latest other run whose first call was this run's first.
  Outcome replayed(std::int64_t position, const std::string& hash, const Call& call) {
    const std::string what = "a " + call.purpose + " request to model " + call.request.model +
                             " (request hash " + hash + ")";
    if (position == 0) source_run_ = store_.run_opened_by(hash, context_.run_id).value_or(0);
    if (source_run_ == 0)
      throw ProposerError("replaying only: the store has no recorded reply for " + what +
                          "; record it with a live run first");
    if (source_.empty()) source_ = store_.model_calls(source_run_);
    const std::string run = "run " + std::to_string(source_run_);
    if (position >= static_cast<std::int64_t>(source_.size()))
      throw ProposerError("replaying only: " + run + " made " + std::to_string(source_.size()) +
                          " model calls; this run asks for another, " + what);
    const db::ModelCall& recorded = source_[static_cast<std::size_t>(position)];
    if (recorded.request_hash != hash)
      throw ProposerError(
          "replaying only: model call " + std::to_string(position + 1) + " differs from " + run +
          "'s (" + what + ", recorded " + recorded.request_hash +
          "): the run has taken another path (the code, settings or seed changed?)");
    if (!recorded.text_stored)
      throw ProposerError("replaying only: " + run +
                          "'s model calls were stored as hashes only and cannot be replayed");
    return outcome_of(recorded);
  }

  // Answers every call and records each in call order, so that ids and the run do not depend
  // on which came first. Each call is the run's next: a resumed run answers the calls it made
  // before from its own record; a replay from the recorded run's call at the same position;
  // with the cache, a request recorded before is answered from the store; the rest go to the
  // server, up to `concurrency` at once.
  std::vector<Outcome> call_all(std::vector<Call> calls) {
    std::vector<Outcome> outcomes(calls.size());
    std::vector<std::string> bodies, hashes;
    std::vector<std::size_t> live;
    for (std::size_t i = 0; i < calls.size(); ++i) {
      const std::int64_t position = next_position_++;
      if (settings_.send_seed) calls[i].request.seed = call_seed(calls[i].seed, position);
      bodies.push_back(request_body(calls[i].request));
      hashes.push_back(request_key(bodies.back(), position));
      if (auto own = own_answer(position, hashes.back())) {
        outcomes[i] = *own;  // recorded already: it has its call id
      } else if (settings_.replay_only) {
        outcomes[i] = replayed(position, hashes.back(), calls[i]);
      } else if (auto hit =
                     settings_.use_cache ? store_.cached_model_call(hashes.back()) : std::nullopt) {
        outcomes[i] = outcome_of(*hit);
      } else {
        live.push_back(i);
      }
    }
    support::parallel_for(live.size(), static_cast<unsigned>(settings_.concurrency),
                          [&](std::size_t k) { outcomes[live[k]] = send(calls[live[k]].request); });
    for (std::size_t i = 0; i < calls.size(); ++i)
      if (outcomes[i].call_id == 0)
        outcomes[i].call_id = record(calls[i], bodies[i], hashes[i], outcomes[i]);
    for (const Outcome& outcome : outcomes) count_failure(outcome);
    return outcomes;
  }

  Outcome send(const ChatRequest& request) const {
    Outcome outcome;
    const auto start = std::chrono::steady_clock::now();
    try {
      outcome.reply = client_.complete(request);
    } catch (const CallError& e) {
      outcome.error = e.what();
    }
    outcome.latency_ms =
        std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - start).count();
    return outcome;
  }

  std::int64_t record(const Call& call, const std::string& body, const std::string& hash,
                      const Outcome& outcome) {
    const std::string& key = settings_.server.key;
    db::ModelCall row;
    row.run_id = context_.run_id;
    row.model = call.request.model;
    row.purpose = call.purpose;
    row.latency_ms = outcome.latency_ms;
    row.request_hash = hash;
    row.text_stored = settings_.store_text;
    row.cached = outcome.cached;
    row.error = redact(outcome.error, key);
    const std::string response = outcome.reply ? redact(outcome.reply->text, key) : "";
    row.request = settings_.store_text ? redact(body, key) : hash;
    row.response = settings_.store_text ? response : db::content_hash(response);
    if (outcome.reply) {
      row.prompt_tokens = outcome.reply->prompt_tokens;
      row.completion_tokens = outcome.reply->completion_tokens;
      row.finish_reason = outcome.reply->finish_reason;
      row.cost = cost(call.request.model, row.prompt_tokens, row.completion_tokens);
    }
    return store_.record_model_call(row);
  }

  double cost(const std::string& model, std::int64_t in, std::int64_t out) const {
    for (const ModelSpec& m : settings_.models)
      if (m.name == model)
        return (static_cast<double>(in) * m.price_in_per_mtok +
                static_cast<double>(out) * m.price_out_per_mtok) /
               1e6;
    return 0;
  }

  void count_failure(const Outcome& outcome) {
    if (outcome.reply) {
      failures_in_a_row_ = 0;
      return;
    }
    if (++failures_in_a_row_ >= settings_.max_consecutive_failures)
      throw ProposerError("the model server at " + client_.endpoint() + " failed " +
                          std::to_string(failures_in_a_row_) + " calls in a row; the last: " +
                          redact(outcome.error, settings_.server.key));
  }

  // The programs of a reply; a reply without one is itself a (failed) candidate, so that the
  // model sees what went wrong and a run cannot spin on replies that hold nothing.
  std::vector<Proposal> proposals_of(const Outcome& outcome) const {
    std::vector<Proposal> proposals;
    if (!outcome.reply) return proposals;
    const ExtractedPrograms found =
        extract_programs(outcome.reply->text, outcome.reply->finish_reason);
    for (const std::string& program : found.programs)
      proposals.push_back(Proposal{program, name(), outcome.call_id});
    if (proposals.empty())
      proposals.push_back(Proposal{"# the reply held no program in a fenced ```ofl block:\n" +
                                       outcome.reply->text.substr(0, kMaxFailedReplyBytes),
                                   name(), outcome.call_id});
    return proposals;
  }

  propose::ProposalContext context_;
  LlmSettings settings_;
  ChatClient client_;
  db::Store store_;
  std::string system_, header_;
  std::vector<db::ModelCall> own_;  ///< the calls this run made before it was resumed
  std::int64_t next_position_ = 0;  ///< the run's next call, from 0
  db::Id source_run_ = 0;           ///< replaying only: the run whose calls are replayed
  std::vector<db::ModelCall> source_;
  int failures_in_a_row_ = 0;
};

}  // namespace

std::uint64_t call_seed(std::uint64_t request_seed, std::int64_t position) {
  std::uint64_t z = request_seed + 0x9e3779b97f4a7c15ULL * static_cast<std::uint64_t>(position + 1);
  z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ULL;  // splitmix64's finaliser
  z = (z ^ (z >> 27)) * 0x94d049bb133111ebULL;
  return (z ^ (z >> 31)) % (std::uint64_t{1} << 31);  // servers take a 31-bit seed
}

std::unique_ptr<propose::Proposer> make_llm_proposer(const propose::ProposalContext& context,
                                                     const LlmSettings& settings,
                                                     const std::string& db_path) {
  return std::make_unique<LlmProposer>(context, settings, db_path);
}

}  // namespace optiflow::llm
