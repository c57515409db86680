// SHA-256 (FIPS 180-4), small and dependency-free.
//
// The engine must build with the CUDA toolkit, abseil and nlohmann-json alone
// (no OpenSSL), yet datasets are content-addressed by SHA-256: this file is
// that hash. It is checked against the NIST test vectors
// (tests/base/sha256_test.cc).
//
// A Sha256 object is a plain value; it is not synchronized.
#ifndef SMALLEM_BASE_SHA256_H_
#define SMALLEM_BASE_SHA256_H_

#include <array>
#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>

#include "absl/status/statusor.h"

namespace smallem {

class Sha256 {
 public:
  using Digest = std::array<uint8_t, 32>;

  Sha256();

  // Appends n bytes to the message.
  void Update(const void* data, size_t n);
  void Update(std::string_view data) { Update(data.data(), data.size()); }

  // Pads the message and returns its digest. The object must not be used
  // again afterwards (CHECKed).
  Digest Finish();

  // Lower-case hexadecimal, 64 characters.
  static std::string ToHex(const Digest& digest);

 private:
  void Compress(const uint8_t* block);

  std::array<uint32_t, 8> state_;
  std::array<uint8_t, 64> buffer_;
  size_t buffered_ = 0;    // bytes in buffer_
  uint64_t length_ = 0;    // message length in bytes so far
  bool finished_ = false;
};

// Lower-case hex digest of data.
std::string Sha256Hex(std::string_view data);

// Lower-case hex digest of the file at path, read in blocks. NotFound when it
// cannot be opened, DataLoss on a read error.
absl::StatusOr<std::string> Sha256FileHex(const std::string& path);

}  // namespace smallem

#endif  // SMALLEM_BASE_SHA256_H_
