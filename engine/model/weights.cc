#include "engine/model/weights.h"

#include <cstring>
#include <vector>

#include "absl/strings/str_cat.h"
#include "base/status_macros.h"
#include "engine/io/safetensors.h"
#include "nlohmann/json.hpp"

namespace smallem {

absl::Status SaveWeights(const Model& model, const std::string& path) {
  std::vector<char> host(model.values().bytes());
  model.backend().CopyToHost(host.data(), model.values().data, host.size());
  SafetensorsFile file;
  file.metadata["config"] = model.config().ToJson().dump();
  file.metadata["format"] = "smallem";
  const float* base = model.values().f32();
  for (const Model::Parameter& p : model.parameters()) {
    HostTensor t{.name = p.name, .dtype = DType::kF32};
    for (int i = 0; i < p.value.shape.rank(); ++i) t.shape.push_back(p.value.shape[i]);
    const char* begin = host.data() + (p.value.f32() - base) * sizeof(float);
    t.data.assign(begin, begin + p.value.bytes());
    file.tensors.push_back(std::move(t));
  }
  return WriteSafetensors(path, file);
}

absl::StatusOr<std::unique_ptr<Model>> LoadWeights(const std::string& path, Backend& backend) {
  ASSIGN_OR_RETURN(const SafetensorsFile file, ReadSafetensors(path));
  auto it = file.metadata.find("config");
  if (it == file.metadata.end()) {
    return absl::InvalidArgumentError(
        absl::StrCat(path, ": no model config in __metadata__ (not a smallem weights file?)"));
  }
  nlohmann::json j = nlohmann::json::parse(it->second, nullptr, false);
  if (j.is_discarded()) return absl::InvalidArgumentError(absl::StrCat(path, ": config is not JSON"));
  absl::StatusOr<ModelConfig> config = ModelConfig::FromJson(j);
  if (!config.ok()) return absl::InvalidArgumentError(absl::StrCat(path, ": ", config.status().message()));
  // Files written before biases were configurable say nothing: the tensors do.
  if (!j.contains("architecture") || !j["architecture"].contains("bias")) {
    config->architecture.bias = file.Find("blocks.0.attn.query.bias") != nullptr;
  }
  ASSIGN_OR_RETURN(std::unique_ptr<Model> model, Model::Create(*config, backend));
  std::vector<char> host(model->values().bytes());
  const float* base = model->values().f32();
  for (const Model::Parameter& p : model->parameters()) {
    const HostTensor* t = file.Find(p.name);
    if (!t) return absl::InvalidArgumentError(absl::StrCat(path, ": tensor ", p.name, " missing"));
    std::vector<int64_t> want;
    for (int i = 0; i < p.value.shape.rank(); ++i) want.push_back(p.value.shape[i]);
    if (t->dtype != DType::kF32 || t->shape != want) {
      return absl::InvalidArgumentError(absl::StrCat(
          path, ": tensor ", p.name, " has the wrong dtype or shape for its config (expected F32 ",
          p.value.shape.ToString(), ")"));
    }
    std::memcpy(host.data() + (p.value.f32() - base) * sizeof(float), t->data.data(), t->data.size());
  }
  model->backend().CopyToDevice(model->values().data, host.data(), host.size());
  return model;
}

}  // namespace smallem
