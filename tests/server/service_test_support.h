// Helpers for tests that talk to a real Coordinator over gRPC: a fake but
// well-formed dataset directory, its upload, and a minimal grid.
#ifndef SMALLEM_TESTS_SERVER_SERVICE_TEST_SUPPORT_H_
#define SMALLEM_TESTS_SERVER_SERVICE_TEST_SUPPORT_H_

#include <chrono>
#include <fstream>
#include <memory>
#include <string>

#include "absl/strings/str_cat.h"
#include "base/sha256.h"
#include "corpus/dataset.h"
#include "grpcpp/grpcpp.h"
#include "nlohmann/json.hpp"
#include "smallem/v1/client.grpc.pb.h"
#include "smallem/v1/worker.pb.h"

namespace smallem::testing {

inline void WriteFile(const std::string& path, const std::string& bytes) {
  std::ofstream out(path, std::ios::binary | std::ios::trunc);
  out << bytes;
}

inline std::string ReadFile(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  return std::string(std::istreambuf_iterator<char>(in), {});
}

// Writes a dataset directory whose hashes are consistent (its tokens are not
// meant for training). Returns its content hash.
inline std::string WriteFakeDataset(const std::string& dir, int train_bytes = 3000) {
  std::filesystem::create_directories(dir);
  const std::string tokenizer = R"({"type":"byte_bpe","merges":[],"special":{}})";
  std::string train(train_bytes, '\0');
  for (int i = 0; i < train_bytes; ++i) train[i] = static_cast<char>(i % 200);
  const std::string val(400, '\1');
  WriteFile(dir + "/tokenizer.json", tokenizer);
  WriteFile(dir + "/train.bin", train);
  WriteFile(dir + "/val.bin", val);
  const std::string hash =
      DatasetContentHash(Sha256Hex(tokenizer), Sha256Hex(train), Sha256Hex(val));
  nlohmann::json meta = {{"vocab", 256},
                         {"sha256", {{"tokenizer.json", Sha256Hex(tokenizer)},
                                     {"train.bin", Sha256Hex(train)},
                                     {"val.bin", Sha256Hex(val)}}},
                         {"content_hash", hash}};
  WriteFile(dir + "/meta.json", meta.dump());
  return hash;
}

inline std::unique_ptr<grpc::ClientContext> Context(int seconds = 10) {
  auto context = std::make_unique<grpc::ClientContext>();
  context->set_deadline(std::chrono::system_clock::now() + std::chrono::seconds(seconds));
  return context;
}

// Uploads the four files of `dir` in chunks of `chunk` bytes.
inline grpc::Status UploadDirectory(v1::ClientService::Stub& stub, const std::string& dir,
                                    const std::string& hash, int chunk = 1000,
                                    v1::UploadDatasetResponse* response = nullptr) {
  v1::UploadDatasetResponse ignored;
  if (response == nullptr) response = &ignored;
  auto context = Context();
  auto writer = stub.UploadDataset(context.get(), response);
  for (const char* name : {"meta.json", "tokenizer.json", "train.bin", "val.bin"}) {
    const std::string bytes = ReadFile(dir + "/" + name);
    for (size_t offset = 0; offset < bytes.size(); offset += chunk) {
      v1::DatasetChunk c;
      c.set_content_hash(hash);
      c.set_file_name(name);
      c.set_file_size(static_cast<int64_t>(bytes.size()));
      c.set_offset(static_cast<int64_t>(offset));
      c.set_data(bytes.substr(offset, chunk));
      if (!writer->Write(c)) break;
    }
  }
  writer->WritesDone();
  return writer->Finish();
}

// A grid of `variants` variants (lr steps) × `seeds` seeds over dataset dir
// `data`, named `name`.
// A registration of worker "w1" with one CPU device of class "cpu-test".
inline v1::RegisterRequest CpuRegistration() {
  v1::RegisterRequest request;
  request.set_worker_id("w1");
  request.set_hostname("test");
  v1::Device* d = request.add_devices();
  d->set_name("cpu");
  d->set_device_class("cpu-test");
  return request;
}

inline std::string MakeGridYaml(const std::string& name, const std::string& data, int variants,
                                int seeds, int steps = 20) {
  std::string yaml = absl::StrCat(
      "name: ", name, "\ndata: ", data,
      "\nbase: {arch: gpt2, layers: 1, heads: 2, embed: 32, context: 32, batch: 4, "
      "eval_batches: 4}\nbudget: {steps: ", steps, "}\nseeds: [");
  for (int s = 1; s <= seeds; ++s) absl::StrAppend(&yaml, s == 1 ? "" : ", ", s);
  absl::StrAppend(&yaml, "]\nbaseline: v0\nvariants:\n");
  for (int v = 0; v < variants; ++v) {
    absl::StrAppend(&yaml, "  v", v, ": {lr: ", 0.001 * (v + 1), "}\n");
  }
  return yaml;
}

}  // namespace smallem::testing

#endif  // SMALLEM_TESTS_SERVER_SERVICE_TEST_SUPPORT_H_
