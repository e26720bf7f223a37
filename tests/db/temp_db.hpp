// A database path of its own under the temp folder, removed with its -wal, -shm and -journal
// files; shared by the db tests.
#pragma once

#include <unistd.h>

#include <filesystem>
#include <string>
#include <system_error>

namespace optiflow::db::test_support {

class TempDb {
 public:
  TempDb() {
    static int counter = 0;
    path_ = (std::filesystem::temp_directory_path() /
             ("optiflow_db_test_" + std::to_string(::getpid()) + "_" + std::to_string(counter++) +
              ".db"))
                .string();
    remove();
  }
  ~TempDb() { remove(); }
  TempDb(const TempDb&) = delete;
  TempDb& operator=(const TempDb&) = delete;
  const std::string& path() const { return path_; }

 private:
  void remove() const {
    std::error_code ignored;
    for (const char* suffix : {"", "-wal", "-shm", "-journal"})
      std::filesystem::remove(path_ + suffix, ignored);
  }
  std::string path_;
};

}  // namespace optiflow::db::test_support
