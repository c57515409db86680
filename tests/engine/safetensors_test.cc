#include "engine/io/safetensors.h"

#include <filesystem>
#include <fstream>

#include "gtest/gtest.h"

namespace smallem {
namespace {

std::string TempPath(const std::string& name) {
  return (std::filesystem::temp_directory_path() /
          ("smallem-st-" + std::to_string(::getpid()) + "-" + name))
      .string();
}

SafetensorsFile Sample() {
  SafetensorsFile f;
  f.metadata["config"] = "{\"vocab\":11}";
  HostTensor a{.name = "a", .dtype = DType::kF32, .shape = {2, 3}};
  a.data.resize(24);
  for (size_t i = 0; i < a.data.size(); ++i) a.data[i] = static_cast<char>(i);
  HostTensor b{.name = "b", .dtype = DType::kI32, .shape = {1}};
  b.data = {1, 0, 0, 0};
  f.tensors = {a, b};
  return f;
}

TEST(SafetensorsTest, RoundTripsTensorsAndMetadata) {
  const std::string path = TempPath("ok");
  ASSERT_TRUE(WriteSafetensors(path, Sample()).ok());
  auto read = ReadSafetensors(path);
  ASSERT_TRUE(read.ok()) << read.status();
  EXPECT_EQ(read->metadata.at("config"), "{\"vocab\":11}");
  ASSERT_NE(read->Find("a"), nullptr);
  EXPECT_EQ(read->Find("a")->shape, (std::vector<int64_t>{2, 3}));
  EXPECT_EQ(read->Find("a")->data, Sample().tensors[0].data);
  EXPECT_EQ(read->Find("b")->dtype, DType::kI32);
}

TEST(SafetensorsTest, HeaderLengthIsLittleEndianAndDataIsAligned) {
  const std::string path = TempPath("layout");
  ASSERT_TRUE(WriteSafetensors(path, Sample()).ok());
  std::ifstream in(path, std::ios::binary);
  unsigned char len[8];
  in.read(reinterpret_cast<char*>(len), 8);
  uint64_t n = 0;
  for (int i = 0; i < 8; ++i) n |= uint64_t{len[i]} << (8 * i);
  EXPECT_EQ(n % 8, 0u);
  EXPECT_EQ(std::filesystem::file_size(path), 8 + n + 24 + 4);
}

TEST(SafetensorsTest, DamagedFilesAreClearErrors) {
  const std::string path = TempPath("bad");
  ASSERT_TRUE(WriteSafetensors(path, Sample()).ok());
  const auto size = std::filesystem::file_size(path);
  std::filesystem::resize_file(path, size - 3);
  auto truncated = ReadSafetensors(path);
  ASSERT_FALSE(truncated.ok());
  EXPECT_NE(truncated.status().message().find("truncated"), std::string::npos) << truncated.status();

  std::filesystem::resize_file(path, 5);
  EXPECT_FALSE(ReadSafetensors(path).ok());

  { std::ofstream out(path, std::ios::binary | std::ios::trunc); out << "\x04\0\0\0\0\0\0\0{{{{"; }
  auto json = ReadSafetensors(path);
  ASSERT_FALSE(json.ok());
  EXPECT_NE(json.status().message().find(path), std::string::npos);

  auto missing = ReadSafetensors(TempPath("none"));
  EXPECT_EQ(missing.status().code(), absl::StatusCode::kNotFound);
}

}  // namespace
}  // namespace smallem
