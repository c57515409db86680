// A fresh directory for one test, removed with its contents at the end.
// ctest runs tests in parallel, so a test never writes a fixed name under
// ::testing::TempDir(): two parameter instances would overwrite each other.
#ifndef SMALLEM_TESTS_TEMP_DIR_H_
#define SMALLEM_TESTS_TEMP_DIR_H_

#include <stdlib.h>

#include <cstdlib>
#include <filesystem>
#include <string>

namespace smallem::testing {

// A fresh directory under $TMPDIR (or /tmp), deleted with its contents.
class TempDir {
 public:
  TempDir() {
    const char* base = std::getenv("TMPDIR");
    std::string pattern = std::string(base != nullptr ? base : "/tmp") + "/smallem_test_XXXXXX";
    char* made = mkdtemp(pattern.data());
    if (made == nullptr) std::abort();
    path_ = made;
  }
  ~TempDir() {
    std::error_code ignored;
    std::filesystem::remove_all(path_, ignored);
  }
  TempDir(const TempDir&) = delete;
  TempDir& operator=(const TempDir&) = delete;

  const std::string& path() const { return path_; }
  std::string Join(const std::string& name) const { return path_ + "/" + name; }

 private:
  std::string path_;
};

}  // namespace smallem::testing

#endif  // SMALLEM_TESTS_TEMP_DIR_H_
