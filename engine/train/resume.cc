#include "engine/train/resume.h"

#include <map>
#include <string_view>
#include <utility>

#include "absl/strings/str_cat.h"
#include "base/status_macros.h"
#include "nlohmann/json.hpp"
#include "runspec/run_result.h"

namespace smallem {
namespace {

std::vector<float> ToHost(Backend& backend, const Tensor& t) {
  std::vector<float> values(static_cast<size_t>(t.numel()));
  backend.CopyToHost(values.data(), t.data, values.size() * sizeof(float));
  return values;
}

// The tensors a checkpoint holds for this model and optimizer, in order.
std::vector<std::pair<std::string, Tensor>> StateOf(const Model& model,
                                                    const Optimizer& optimizer) {
  std::vector<std::pair<std::string, Tensor>> out;
  for (const Model::Parameter& p : model.parameters()) out.emplace_back("param." + p.name, p.value);
  for (const Optimizer::StateTensor& t : optimizer.StateTensors()) {
    out.emplace_back("optim." + t.name, t.tensor);
  }
  return out;
}

}  // namespace

std::string CheckpointSpecJson(const RunSpec& spec) {
  nlohmann::json j = spec.ToJson();
  j.erase("data");
  j.erase("checkpoint_minutes");
  return j.dump();
}

Checkpoint CaptureCheckpoint(const CheckpointOwner& owner, const TrainingPosition& position,
                             const Model& model, const Optimizer& optimizer,
                             const TrainBatches& batches) {
  Checkpoint c{.spec_json = owner.spec_json,
               .dataset_hash = owner.dataset_hash,
               .device_class = owner.device_class,
               .steps = position.steps,
               .train_seconds = position.train_seconds,
               .last_loss = position.last_loss,
               .resumes = position.resumes,
               .optimizer_steps = optimizer.Steps(),
               .data = batches.Save()};
  for (const auto& [name, tensor] : StateOf(model, optimizer)) {
    c.tensors.push_back(Checkpoint::F32{.name = name, .values = ToHost(model.backend(), tensor)});
  }
  return c;
}

absl::Status RestoreCheckpoint(const Checkpoint& checkpoint, const CheckpointOwner& owner,
                               Model& model, Optimizer& optimizer, TrainBatches& batches) {
  auto refuse = [](const char* what, const std::string& saved, const std::string& here) {
    return absl::FailedPreconditionError(absl::StrCat(
        "the checkpoint belongs to another ", what, " (", saved, ", not ", here,
        "); a run resumes only from its own checkpoint, on its own class of device"));
  };
  if (checkpoint.spec_json != owner.spec_json) {
    return refuse("run spec", checkpoint.spec_json, owner.spec_json);
  }
  if (checkpoint.dataset_hash != owner.dataset_hash) {
    return refuse("dataset", checkpoint.dataset_hash, owner.dataset_hash);
  }
  if (checkpoint.device_class != owner.device_class) {
    return refuse("device class", checkpoint.device_class, owner.device_class);
  }
  std::map<std::string_view, const std::vector<float>*> saved;
  for (const Checkpoint::F32& t : checkpoint.tensors) saved[t.name] = &t.values;
  const std::vector<std::pair<std::string, Tensor>> state = StateOf(model, optimizer);
  if (saved.size() != state.size()) {
    return absl::DataLossError(absl::StrCat("the checkpoint holds ", saved.size(),
                                            " tensors; this model and optimizer have ",
                                            state.size()));
  }
  for (const auto& [name, tensor] : state) {
    auto it = saved.find(name);
    if (it == saved.end() || static_cast<int64_t>(it->second->size()) != tensor.numel()) {
      return absl::DataLossError(absl::StrCat(
          "the checkpoint's ", name, it == saved.end() ? " is missing" : " has another size"));
    }
    model.backend().CopyToDevice(tensor.data, it->second->data(), it->second->size() * sizeof(float));
  }
  RETURN_IF_ERROR(batches.Restore(checkpoint.data));
  optimizer.RestoreSteps(checkpoint.optimizer_steps);
  model.backend().Synchronize();
  return absl::OkStatus();
}

nlohmann::json DeterministicResult(nlohmann::json result) {
  for (const char* key : {result_keys::kTrainSeconds, result_keys::kTokensPerS,
                          result_keys::kGenerationTokensPerS, result_keys::kMfu,
                          result_keys::kResumes}) {
    result.erase(key);
  }
  return result;
}

}  // namespace smallem
