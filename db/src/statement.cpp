// Prepared statements and the errors they raise.
#include "statement.hpp"

namespace optiflow::db {

std::string sql_excerpt(std::string_view sql) {
  std::string words;
  bool space = false;
  for (char c : sql) {
    const bool blank = c == ' ' || c == '\n' || c == '\t' || c == '\r';
    if (blank) {
      space = !words.empty();
      continue;
    }
    if (space) words += ' ';
    space = false;
    words += c;
    if (words.size() >= 60) return words + "...";
  }
  return words;
}

void throw_sqlite(sqlite3* db, const std::string& call, int code) {
  throw DbError(call, code & 0xff, db != nullptr ? sqlite3_errmsg(db) : sqlite3_errstr(code));
}

Statement::Statement(sqlite3* db, std::string_view sql) : sql_(sql) {
  const int rc = sqlite3_prepare_v3(db, sql.data(), static_cast<int>(sql.size()),
                                    SQLITE_PREPARE_PERSISTENT, &stmt_, nullptr);
  if (rc != SQLITE_OK) throw_sqlite(db, "sqlite3_prepare_v3(" + sql_excerpt(sql) + ")", rc);
}

Statement::~Statement() {
  sqlite3_finalize(stmt_);
}

void Statement::check(int rc, const char* call) const {
  if (rc != SQLITE_OK)
    throw_sqlite(sqlite3_db_handle(stmt_), std::string(call) + "(" + sql_excerpt(sql_) + ")", rc);
}

bool Statement::step() {
  const int rc = sqlite3_step(stmt_);
  if (rc == SQLITE_ROW) return true;
  if (rc == SQLITE_DONE) return false;
  throw_sqlite(sqlite3_db_handle(stmt_), "sqlite3_step(" + sql_excerpt(sql_) + ")", rc);
}

void Statement::run() {
  while (step()) {
  }
}

std::string Statement::text(int column) const {
  const auto* bytes = sqlite3_column_text(stmt_, column);
  if (bytes == nullptr) return {};
  return std::string(reinterpret_cast<const char*>(bytes),
                     static_cast<std::size_t>(sqlite3_column_bytes(stmt_, column)));
}

void Statement::reset() {
  sqlite3_reset(stmt_);  // repeats the last step's error, which was already reported
  sqlite3_clear_bindings(stmt_);
}

}  // namespace optiflow::db
