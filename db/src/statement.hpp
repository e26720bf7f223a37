// A small RAII wrapper over sqlite3_stmt: typed bind and column access, every failure a
// DbError naming the call and the statement.
#pragma once

#include <sqlite3.h>

#include <concepts>
#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <type_traits>

#include "optiflow/db/store.hpp"

namespace optiflow::db {

/// The first words of a statement, for error messages.
std::string sql_excerpt(std::string_view sql);

/// Throws DbError for `call` with the connection's current error message.
[[noreturn]] void throw_sqlite(sqlite3* db, const std::string& call, int code);

class Statement {
 public:
  Statement(sqlite3* db, std::string_view sql);
  ~Statement();
  Statement(const Statement&) = delete;
  Statement& operator=(const Statement&) = delete;

  /// Binds the 1-based parameter `index`: integers (unsigned ones bit for bit), floating
  /// point, text, std::nullopt (NULL) or an optional of these.
  template <class T>
  void bind(int index, const T& value) {
    if constexpr (std::is_same_v<T, std::nullopt_t>) {
      check(sqlite3_bind_null(stmt_, index), "sqlite3_bind_null");
    } else if constexpr (std::is_same_v<T, bool> || std::integral<T>) {
      check(sqlite3_bind_int64(stmt_, index, static_cast<sqlite3_int64>(value)),
            "sqlite3_bind_int64");
    } else if constexpr (std::floating_point<T>) {
      check(sqlite3_bind_double(stmt_, index, static_cast<double>(value)), "sqlite3_bind_double");
    } else if constexpr (std::convertible_to<const T&, std::string_view>) {
      const std::string_view text(value);
      check(sqlite3_bind_text64(stmt_, index, text.data(), text.size(), SQLITE_TRANSIENT,
                                SQLITE_UTF8),
            "sqlite3_bind_text64");
    } else {
      if (value) {
        bind(index, *value);
      } else {
        bind(index, std::nullopt);
      }
    }
  }
  /// Binds the arguments to parameters 1, 2, ...
  template <class... Args>
  void bind_all(const Args&... args) {
    int index = 1;
    (bind(index++, args), ...);
  }

  /// Advances: true when a row is ready, false when the statement is done.
  bool step();
  /// Steps to the end, for statements that return no rows.
  void run();

  bool is_null(int column) const { return sqlite3_column_type(stmt_, column) == SQLITE_NULL; }
  std::int64_t int64(int column) const { return sqlite3_column_int64(stmt_, column); }
  std::uint64_t uint64(int column) const { return static_cast<std::uint64_t>(int64(column)); }
  double real(int column) const { return sqlite3_column_double(stmt_, column); }
  std::string text(int column) const;

  /// Ready to run again, parameters cleared.
  void reset();

 private:
  void check(int rc, const char* call) const;

  sqlite3_stmt* stmt_ = nullptr;
  std::string sql_;
};

/// A cached statement lent for one use: reset (ending any read it holds) when it goes.
class Query {
 public:
  explicit Query(Statement& statement) : statement_(&statement) {}
  ~Query() { statement_->reset(); }
  Query(const Query&) = delete;
  Query& operator=(const Query&) = delete;
  Statement* operator->() const { return statement_; }
  Statement& operator*() const { return *statement_; }

 private:
  Statement* statement_;
};

}  // namespace optiflow::db
