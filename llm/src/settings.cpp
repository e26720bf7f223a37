#include "optiflow/llm/settings.hpp"

#include <cstdlib>
#include <sstream>

#include "optiflow/support/error.hpp"
#include "optiflow/support/parse_support.hpp"
#include "optiflow/support/text_file.hpp"

namespace optiflow::llm {
namespace {

using support::FieldReader;
using support::InputError;
using support::SourceLocation;

[[noreturn]] void fail(const std::string& source, const std::string& field,
                       const std::string& message) {
  throw InputError(SourceLocation{source, 0, 0, field}, message);
}

double parse_number(const std::string& text, const std::string& source) {
  std::size_t used = 0;
  double value = 0;
  try {
    value = std::stod(text, &used);
  } catch (const std::exception&) {
    used = 0;
  }
  if (used == 0 || used != text.size()) fail(source, {}, "'" + text + "' is not a number");
  return value;
}

void read_config(const std::string& path, LlmSettings& settings, const EnvReader& getenv) {
  const nlohmann::json doc = support::parse_json_text(support::read_text_file(path), path);
  const FieldReader f(doc, "", path);
  if (f.has("key"))
    fail(path, "key",
         "the config file must not hold the API key: name the environment variable that holds "
         "it with \"key_env\"");
  settings.server.url = f.string_or("url", settings.server.url);
  if (f.has("key_env")) {
    const std::string name = f.string("key_env");
    const char* key = getenv(name.c_str());
    if (key == nullptr || *key == '\0') fail(path, "key_env", "$" + name + " is not set");
    settings.server.key = key;
  }
  if (f.has("models")) {
    settings.models.clear();
    const nlohmann::json& models = f.array("models");
    for (std::size_t i = 0; i < models.size(); ++i) {
      const FieldReader m(models[i], "models[" + std::to_string(i) + "]", path);
      settings.models.push_back(ModelSpec{m.string("name"), m.number_or("weight", 1),
                                          m.number_or("price_in_per_mtok", 0),
                                          m.number_or("price_out_per_mtok", 0)});
    }
  }
  settings.server.timeout_s = f.number_or("timeout_s", settings.server.timeout_s);
  settings.server.retries = f.int32_or("retries", 0, settings.server.retries);
  settings.server.backoff_s = f.number_or("backoff_s", settings.server.backoff_s);
  settings.temperature = f.number_or("temperature", settings.temperature);
  if (f.has("max_tokens")) settings.max_tokens = f.integer("max_tokens", 1, 1 << 24);
  settings.use_max_completion_tokens =
      f.boolean_or("max_completion_tokens", settings.use_max_completion_tokens);
  settings.send_seed = f.boolean_or("send_seed", settings.send_seed);
  settings.concurrency = f.int32_or("concurrency", 1, settings.concurrency);
  settings.candidates_per_call = f.int32_or("candidates_per_call", 1, settings.candidates_per_call);
  if (f.has("store")) {
    const std::string store = f.string("store");
    if (store != "text" && store != "hashes") fail(path, "store", "must be \"text\" or \"hashes\"");
    settings.store_text = store == "text";
  }
  if (f.has("max_total_tokens"))
    settings.max_total_tokens = f.integer("max_total_tokens", 0, std::int64_t{1} << 50);
  settings.max_cost = f.number_or("max_cost", settings.max_cost);
  settings.max_consecutive_failures =
      f.int32_or("max_consecutive_failures", 1, settings.max_consecutive_failures);
}

}  // namespace

std::vector<ModelSpec> parse_model_list(const std::string& text, const std::string& source) {
  std::vector<ModelSpec> models;
  std::istringstream items(text);
  std::string item;
  while (std::getline(items, item, ',')) {
    if (item.empty()) continue;
    ModelSpec model;
    // A weight follows the last ':' only when it is a number ("qwen2.5-coder:32b" is a name).
    const auto colon = item.rfind(':');
    if (colon != std::string::npos && colon + 1 < item.size() &&
        item.find_first_not_of("0123456789.", colon + 1) == std::string::npos) {
      model.name = item.substr(0, colon);
      model.weight = parse_number(item.substr(colon + 1), source);
    } else {
      model.name = item;
    }
    models.push_back(std::move(model));
  }
  return models;
}

LlmSettings load_settings(const std::string& config_path, const EnvReader& reader) {
  const EnvReader getenv = reader ? reader : [](const char* name) { return std::getenv(name); };
  LlmSettings settings;
  if (!config_path.empty()) read_config(config_path, settings, getenv);
  if (const char* url = getenv("OPTIFLOW_LLM_URL"); url != nullptr && *url != '\0')
    settings.server.url = url;
  if (const char* models = getenv("OPTIFLOW_LLM_MODEL"); models != nullptr && *models != '\0')
    settings.models = parse_model_list(models, "OPTIFLOW_LLM_MODEL");
  if (const char* key = getenv("OPTIFLOW_LLM_KEY"); key != nullptr && *key != '\0')
    settings.server.key = key;
  if (const char* timeout = getenv("OPTIFLOW_LLM_TIMEOUT"); timeout != nullptr && *timeout != '\0')
    settings.server.timeout_s = parse_number(timeout, "OPTIFLOW_LLM_TIMEOUT");
  return settings;
}

void validate(const LlmSettings& s) {
  const std::string where = "LLM settings";
  if (s.server.url.empty() && !s.replay_only)
    fail(where, "url",
         "no model server: set OPTIFLOW_LLM_URL (e.g. http://localhost:8000/v1), the server's "
         "URL, or \"url\" in the settings file");
  if (s.models.empty())
    fail(where, "model",
         "no model: set OPTIFLOW_LLM_MODEL, the models, or \"models\" in the settings file");
  for (const ModelSpec& m : s.models) {
    if (m.name.empty()) fail(where, "model", "a model without a name");
    if (!(m.weight > 0)) fail(where, "model", "model '" + m.name + "' needs a positive weight");
    if (m.price_in_per_mtok < 0 || m.price_out_per_mtok < 0)
      fail(where, "model", "model '" + m.name + "' has a negative price");
  }
  if (!(s.server.timeout_s > 0)) fail(where, "timeout", "the timeout must be positive");
  if (s.server.retries < 0) fail(where, "retries", "must be 0 or more");
  if (s.concurrency < 1) fail(where, "concurrency", "must be 1 or more");
  if (s.candidates_per_call < 1 || s.candidates_per_call > 16)
    fail(where, "candidates_per_call", "must be from 1 to 16");
  if (s.max_tokens < 1) fail(where, "max_tokens", "must be 1 or more");
  if (s.max_cost < 0 || s.max_total_tokens < 0) fail(where, "budget", "must not be negative");
}

}  // namespace optiflow::llm
