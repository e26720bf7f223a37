// Reading and writing the schedule JSON format of docs/formats.md, and reading a schedule file
// in either of OptiFlow's schedule formats (JSON or MSCCL XML).
#pragma once

#include <string>
#include <string_view>

#include "optiflow/schedule/schedule.hpp"

namespace optiflow::schedule {

/// Writes the schedule as JSON: 2-space indent, fixed key order, one line per step, so equal
/// schedules give identical text and parse_schedule_json(write_schedule_json(s)) == s.
std::string write_schedule_json(const Schedule& schedule);
/// support::content_hash(write_schedule_json(schedule)), without building the text.
std::string schedule_hash(const Schedule& schedule);

/// Parses schedule JSON text. `source` names the input in error messages. Checks structure only
/// (types, names, non-negative sizes, one program per rank in rank order); whether the schedule
/// is correct is verify_schedule's business. Throws InputError naming the field (e.g.
/// `programs[3].tbs[1].steps[7].count`) or the line and column of a syntax error.
Schedule parse_schedule_json(std::string_view text, const std::string& source);

/// Reads a schedule file: MSCCL XML when its first non-blank character is '<', else schedule
/// JSON. Errors name the file.
Schedule read_schedule_file(const std::string& path);

}  // namespace optiflow::schedule
