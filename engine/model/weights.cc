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
  // The layout's names, shapes and order (runspec/parameter_layout.h).
  for (const ParameterSlot& s : model.layout().slots()) {
    HostTensor t{.name = s.name, .dtype = DType::kF32, .shape = s.shape};
    const char* begin = host.data() + s.offset * sizeof(float);
    t.data.assign(begin, begin + s.numel * sizeof(float));
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
    // Such files are multi-head: block 0 has a query bias if any.
    ModelConfig with_bias = *config;
    with_bias.architecture.bias = true;
    const ParameterLayout layout(with_bias);
    const int query_bias = layout.blocks()[0].query_bias;
    config->architecture.bias =
        query_bias != kNoSlot && file.Find(layout.slot(query_bias).name) != nullptr;
  }
  ASSIGN_OR_RETURN(std::unique_ptr<Model> model, Model::Create(*config, backend));
  std::vector<char> host(model->values().bytes());
  const std::vector<ParameterSlot>& slots = model->layout().slots();
  for (size_t i = 0; i < slots.size(); ++i) {
    const ParameterSlot& s = slots[i];
    const HostTensor* t = file.Find(s.name);
    if (!t) return absl::InvalidArgumentError(absl::StrCat(path, ": tensor ", s.name, " missing"));
    if (t->dtype != DType::kF32 || t->shape != s.shape) {
      return absl::InvalidArgumentError(absl::StrCat(
          path, ": tensor ", s.name, " has the wrong dtype or shape for its config (expected F32 ",
          model->parameters()[i].value.shape.ToString(), ")"));
    }
    std::memcpy(host.data() + s.offset * sizeof(float), t->data.data(), t->data.size());
  }
  model->backend().CopyToDevice(model->values().data, host.data(), host.size());
  return model;
}

}  // namespace smallem
