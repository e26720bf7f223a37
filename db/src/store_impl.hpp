// The state behind a Store: one connection, its statement cache, and the transaction helper
// every write goes through. Private to db/.
#pragma once

#include <sqlite3.h>

#include <memory>
#include <string>
#include <string_view>
#include <type_traits>
#include <unordered_map>

#include "optiflow/db/store.hpp"
#include "statement.hpp"

namespace optiflow::db {

/// Now as ISO 8601 UTC with milliseconds: 2026-03-05T14:07:31.042Z.
std::string utc_now();

struct Store::Impl {
  sqlite3* db = nullptr;
  std::unordered_map<std::string, std::unique_ptr<Statement>> statements;

  explicit Impl(sqlite3* connection) : db(connection) {}
  ~Impl();
  Impl(const Impl&) = delete;
  Impl& operator=(const Impl&) = delete;

  /// The cached statement for `sql`, prepared on first use.
  Query query(std::string_view sql);
  /// Runs SQL without results (BEGIN, COMMIT, PRAGMA ... = ...).
  void exec(const char* sql) const;

  /// Runs `body` inside BEGIN IMMEDIATE ... COMMIT; on any exception rolls back and rethrows
  /// (a DbError gains `call` as the context of its call).
  template <class Body>
  auto transaction(const char* call, Body&& body) -> decltype(body()) {
    try {
      exec("BEGIN IMMEDIATE");
    } catch (const DbError& e) {
      throw DbError(std::string(call) + ": " + e.call(), e.code(), e.message());
    }
    try {
      if constexpr (std::is_void_v<decltype(body())>) {
        body();
        exec("COMMIT");
      } else {
        auto result = body();
        exec("COMMIT");
        return result;
      }
    } catch (const DbError& e) {
      rollback();
      throw DbError(std::string(call) + ": " + e.call(), e.code(), e.message());
    } catch (...) {
      rollback();
      throw;
    }
  }

 private:
  void rollback() const;
};

/// Applies the forward migrations in schema.cpp up to Store::kSchemaVersion, in one
/// transaction; refuses a database newer than that.
void migrate(Store::Impl& impl);
/// PRAGMA user_version.
int user_version(sqlite3* db);

}  // namespace optiflow::db
