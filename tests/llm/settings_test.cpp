// Model settings from a config file, the environment and their errors.
#include "optiflow/llm/settings.hpp"

#include <gtest/gtest.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <map>

#include "optiflow/support/error.hpp"

namespace optiflow::llm {
namespace {

namespace fs = std::filesystem;

class Settings : public ::testing::Test {
 protected:
  void SetUp() override {
    path_ = fs::temp_directory_path() / ("optiflow-llm-" + std::to_string(::getpid()) + ".json");
  }
  void TearDown() override { fs::remove(path_); }

  std::string config(const std::string& json) const {
    std::ofstream(path_) << json;
    return path_.string();
  }
  EnvReader env() const {
    return [this](const char* name) -> const char* {
      const auto it = env_.find(name);
      return it == env_.end() ? nullptr : it->second.c_str();
    };
  }
  std::string error_of(const std::string& path) const {
    try {
      load_settings(path, env());
    } catch (const support::InputError& e) {
      return e.what();
    }
    return "no error";
  }

  fs::path path_;
  std::map<std::string, std::string> env_;
};

TEST_F(Settings, ReadsTheConfigFileAndTheEnvironmentOverIt) {
  env_["MY_KEY"] = "sk-from-env";
  const std::string path = config(R"({
    "url": "http://file/v1", "key_env": "MY_KEY",
    "models": [{"name": "fast", "weight": 3, "price_in_per_mtok": 0.1, "price_out_per_mtok": 0.4},
               {"name": "strong", "price_in_per_mtok": 2.5}],
    "timeout_s": 30, "temperature": 0.2, "max_tokens": 2000, "max_completion_tokens": true,
    "concurrency": 2, "candidates_per_call": 3, "store": "hashes", "max_total_tokens": 100000,
    "max_cost": 1.5})");
  LlmSettings s = load_settings(path, env());
  EXPECT_EQ(s.server.url, "http://file/v1");
  EXPECT_EQ(s.server.key, "sk-from-env");
  ASSERT_EQ(s.models.size(), 2u);
  EXPECT_EQ(s.models[0].name, "fast");
  EXPECT_DOUBLE_EQ(s.models[0].weight, 3);
  EXPECT_DOUBLE_EQ(s.models[0].price_out_per_mtok, 0.4);
  EXPECT_DOUBLE_EQ(s.models[1].weight, 1);
  EXPECT_DOUBLE_EQ(s.server.timeout_s, 30);
  EXPECT_TRUE(s.use_max_completion_tokens);
  EXPECT_FALSE(s.store_text);
  EXPECT_EQ(s.candidates_per_call, 3);
  EXPECT_EQ(s.max_total_tokens, 100000);
  validate(s);

  env_["OPTIFLOW_LLM_URL"] = "http://env/v1";
  env_["OPTIFLOW_LLM_MODEL"] = "qwen2.5-coder:32b,llama3:2";
  env_["OPTIFLOW_LLM_KEY"] = "sk-env2";
  env_["OPTIFLOW_LLM_TIMEOUT"] = "7.5";
  s = load_settings(path, env());
  EXPECT_EQ(s.server.url, "http://env/v1");
  EXPECT_EQ(s.server.key, "sk-env2");
  EXPECT_DOUBLE_EQ(s.server.timeout_s, 7.5);
  ASSERT_EQ(s.models.size(), 2u);
  EXPECT_EQ(s.models[0].name, "qwen2.5-coder:32b");  // a tag, not a weight
  EXPECT_EQ(s.models[1].name, "llama3");
  EXPECT_DOUBLE_EQ(s.models[1].weight, 2);
}

TEST_F(Settings, DefaultsComeFromTheEnvironmentAlone) {
  env_["OPTIFLOW_LLM_URL"] = "http://localhost:8000/v1";
  env_["OPTIFLOW_LLM_MODEL"] = "m";
  const LlmSettings s = load_settings("", env());
  EXPECT_DOUBLE_EQ(s.server.timeout_s, 120);
  EXPECT_FALSE(s.use_cache);  // a live run samples every call
  EXPECT_TRUE(s.store_text);
  validate(s);
}

TEST_F(Settings, ErrorsNameTheFileFieldOrVariable) {
  EXPECT_NE(error_of(config(R"({"key": "sk-secret"})")).find("key_env"), std::string::npos);
  EXPECT_EQ(error_of(config(R"({"key": "sk-secret"})")).find("sk-secret"), std::string::npos);
  EXPECT_NE(error_of(config(R"({"key_env": "UNSET_VAR"})")).find("$UNSET_VAR is not set"),
            std::string::npos);
  const std::string weight = error_of(config(R"({"models": [{"name": "a", "weight": "x"}]})"));
  EXPECT_NE(weight.find(path_.string()), std::string::npos) << weight;
  EXPECT_NE(weight.find("models[0].weight"), std::string::npos) << weight;
  EXPECT_NE(error_of(config(R"({"store": "everything"})")).find("store"), std::string::npos);
  EXPECT_NE(error_of(config("{ not json")).find(path_.string() + ":1:"), std::string::npos);
  env_["OPTIFLOW_LLM_TIMEOUT"] = "soon";
  EXPECT_NE(error_of("").find("OPTIFLOW_LLM_TIMEOUT"), std::string::npos);
}

TEST_F(Settings, ValidationSaysWhatIsMissing) {
  LlmSettings s;
  auto message = [&] {
    try {
      validate(s);
    } catch (const support::InputError& e) {
      return std::string(e.what());
    }
    return std::string("valid");
  };
  EXPECT_NE(message().find("OPTIFLOW_LLM_URL"), std::string::npos);
  s.server.url = "http://x/v1";
  EXPECT_NE(message().find("OPTIFLOW_LLM_MODEL"), std::string::npos);
  s.models = {{"m", 0}};
  EXPECT_NE(message().find("positive weight"), std::string::npos);
  s.models = {{"m", 1}};
  EXPECT_EQ(message(), "valid");
  s.replay_only = true;  // a replay needs no server
  s.server.url.clear();
  EXPECT_EQ(message(), "valid");
}

}  // namespace
}  // namespace optiflow::llm
