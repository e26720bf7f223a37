// The malformed inputs of tests/fuzz/malformed/<format>/, replayed: every one is rejected by
// its parser with one InputError that names the file and says what is wrong there; the
// fragment each must contain is in tests/fuzz/malformed/EXPECTED (`format/file: fragment`).
// What the fuzzers find goes here, so that CI keeps replaying it.
#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>
#include <map>
#include <sstream>
#include <string>

#include "optiflow/baselines/taccl.hpp"
#include "optiflow/schedule/mscclpp_plan.hpp"
#include "optiflow/schedule/schedule_io.hpp"
#include "optiflow/schedule/teccl_import.hpp"
#include "optiflow/support/error.hpp"
#include "optiflow/topology/nccl_topo_xml.hpp"
#include "optiflow/topology/taccl_topology.hpp"
#include "optiflow/topology/topology_io.hpp"

namespace optiflow {
namespace {

namespace fs = std::filesystem;

const fs::path kMalformed = fs::path(OPTIFLOW_SOURCE_DIR) / "tests" / "fuzz" / "malformed";

std::string slurp(const fs::path& path) {
  std::ifstream in(path, std::ios::binary);
  std::ostringstream text;
  text << in.rdbuf();
  return text.str();
}

// Parses `text` as `format` (the fuzzers' names and input layouts); `name` names it in errors.
void parse_as(const std::string& format, const std::string& text, const std::string& name) {
  if (format == "topology_json") {
    topology::parse_topology_json(text, name);
  } else if (format == "nccl_topo_xml") {
    topology::import_nccl_topology_xml(text, name);
  } else if (format == "taccl_topology") {
    topology::parse_taccl_topology(text, name, 1);
  } else if (format == "taccl_sketch") {
    baselines::parse_taccl_sketch(text, name);
  } else if (format == "teccl") {  // the solver input, a NUL, its schedule
    const std::size_t nul = text.find('\0');
    ASSERT_NE(nul, std::string::npos) << name;
    schedule::import_teccl_text(text.substr(nul + 1), name, text.substr(0, nul), name);
  } else if (format == "schedule_json") {
    schedule::parse_schedule_json(text, name);
  } else if (format == "mscclpp_plan") {
    schedule::parse_mscclpp_plan(text, name);
  } else {
    FAIL() << "no parser for the folder " << format;
  }
}

std::map<std::string, std::string> expected_fragments() {
  std::map<std::string, std::string> expected;
  std::istringstream lines(slurp(kMalformed / "EXPECTED"));
  for (std::string line; std::getline(lines, line);) {
    if (line.empty() || line[0] == '#') continue;
    const std::size_t colon = line.find(": ");
    if (colon != std::string::npos) expected[line.substr(0, colon)] = line.substr(colon + 2);
  }
  return expected;
}

TEST(MalformedInputs, EachIsRejectedWithOneMessageNamingTheFileAndWhatIsWrong) {
  const auto expected = expected_fragments();
  int replayed = 0;
  for (const auto& folder : fs::directory_iterator(kMalformed)) {
    if (!folder.is_directory()) continue;
    const std::string format = folder.path().filename().string();
    for (const auto& file : fs::directory_iterator(folder.path())) {
      const std::string name = format + "/" + file.path().filename().string();
      ++replayed;
      try {
        parse_as(format, slurp(file.path()), name);
        ADD_FAILURE() << name << " was accepted";
      } catch (const support::InputError& e) {
        const std::string message = e.what();
        EXPECT_EQ(message.rfind(name, 0), 0u)
            << "the message does not start with the file: " << message;
        EXPECT_EQ(message.find('\n'), std::string::npos) << "one line: " << message;
        const auto fragment = expected.find(name);
        if (fragment == expected.end())
          ADD_FAILURE() << name << " has no line in EXPECTED; its message: " << message;
        else
          EXPECT_NE(message.find(fragment->second), std::string::npos)
              << name << ": expected '" << fragment->second << "' in: " << message;
      }
    }
  }
  EXPECT_EQ(replayed, static_cast<int>(expected.size()));
}

}  // namespace
}  // namespace optiflow
