// Weights files: a Model's parameters as safetensors, with the model config
// JSON in `__metadata__["config"]` so a file says how to rebuild its model.
#ifndef SMALLEM_ENGINE_MODEL_WEIGHTS_H_
#define SMALLEM_ENGINE_MODEL_WEIGHTS_H_

#include <memory>
#include <string>

#include "absl/status/statusor.h"
#include "engine/model/model.h"

namespace smallem {

absl::Status SaveWeights(const Model& model, const std::string& path);

// Rebuilds the model the file describes on `backend`. A missing, truncated or
// inconsistent file (a tensor missing, a shape that disagrees with the
// config) is an error naming the file and the tensor.
absl::StatusOr<std::unique_ptr<Model>> LoadWeights(const std::string& path, Backend& backend);

}  // namespace smallem

#endif  // SMALLEM_ENGINE_MODEL_WEIGHTS_H_
