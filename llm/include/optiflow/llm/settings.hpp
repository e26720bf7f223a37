// How the language-model proposer reaches its models and what it may spend: from a config
// file, then OPTIFLOW_LLM_* in the environment, then command-line flags (docs/llm.md).
#pragma once

#include <cstdint>
#include <functional>
#include <string>
#include <vector>

#include "optiflow/llm/chat_client.hpp"

namespace optiflow::llm {

/// One model of the server. With several, each request goes to one of them, drawn by weight
/// from the request's seed (say a fast one for volume and a strong one for quality).
struct ModelSpec {
  std::string name;
  double weight = 1;
  double price_in_per_mtok = 0;   ///< cost per million prompt tokens; 0: not priced
  double price_out_per_mtok = 0;  ///< cost per million completion tokens
};

struct LlmSettings {
  ServerSettings server;
  std::vector<ModelSpec> models;
  double temperature = 0.7;
  std::int64_t max_tokens = 4096;
  bool use_max_completion_tokens = false;  ///< reasoning models
  bool send_seed = true;                   ///< pass each request's seed to the server
  int concurrency = 4;                     ///< requests in flight at once
  int candidates_per_call = 4;             ///< programs asked for in one reply
  bool store_text = true;  ///< false: the store keeps only hashes of prompts and replies
  /// Answer a request whose hash was recorded before (in any run) from the store. Off by
  /// default: in a live run every call is a new sample (docs/llm.md, "Replay").
  bool use_cache = false;
  /// Answer only from the store, call by call in the order a recorded run made them; a call
  /// that run did not make is an error.
  bool replay_only = false;
  std::int64_t max_total_tokens = 0;  ///< stop once the run's calls used this many; 0: no cap
  double max_cost = 0;                ///< stop once the run's calls cost this much; 0: no cap
  int max_consecutive_failures = 3;   ///< failed calls in a row that end the run
};

/// Reads the environment through `getenv` (std::getenv by default).
using EnvReader = std::function<const char*(const char*)>;

/// Settings from the JSON config file at `config_path` (none when empty), overridden by
/// OPTIFLOW_LLM_URL, OPTIFLOW_LLM_MODEL (comma-separated names, each "name" or
/// "name:weight"), OPTIFLOW_LLM_KEY and OPTIFLOW_LLM_TIMEOUT (seconds per request). The
/// config file names the environment variable holding the key ("key_env"), never the key.
/// Throws support::InputError naming the file and field, or the variable, for a bad value.
LlmSettings load_settings(const std::string& config_path, const EnvReader& getenv = {});

/// Throws support::InputError unless the settings can make calls: a URL (not needed for a
/// replay) and at least one model with a positive weight, sensible limits.
void validate(const LlmSettings& settings);

/// "name" or "name:weight", comma-separated, as OPTIFLOW_LLM_MODEL and --llm-model take them.
std::vector<ModelSpec> parse_model_list(const std::string& text, const std::string& source);

}  // namespace optiflow::llm
