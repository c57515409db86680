// RunResult: what one finished training run measured — the result JSON the
// trainer writes to result.json, the worker sends with Complete, the
// coordinator checks and stores, and reports, `smallemctl status`, `export`
// and `run` read (docs/architecture.md § The formats). DivergedResult: what
// a run that diverged records instead (its result.json; the worker turns it
// into a Fail). The child's progress and checkpoint lines are in
// engine/train/progress_events.h; this file holds the records only.
//
// Here, beside the RunSpec a result answers, because runspec/ is the one
// tensor-free library the engine (which writes results) and the server,
// worker and smallemctl (which read them) all link.
//
// Every key is spelled once, in result_keys below. Plain values; no locks.
#ifndef SMALLEM_RUNSPEC_RUN_RESULT_H_
#define SMALLEM_RUNSPEC_RUN_RESULT_H_

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "nlohmann/json.hpp"

namespace smallem {

// The result JSON's keys (units in RunResult's fields).
namespace result_keys {
inline constexpr char kValNatsPerByte[] = "val_nats_per_byte";
inline constexpr char kValNatsPerToken[] = "val_nats_per_token";
inline constexpr char kValBitsPerByte[] = "val_bits_per_byte";
inline constexpr char kEvalBatches[] = "eval_batches";
inline constexpr char kEvalSpans[] = "eval_spans";
inline constexpr char kEvalTokens[] = "eval_tokens";
inline constexpr char kEvalFingerprint[] = "eval_fingerprint";
inline constexpr char kValMtpNatsPerToken[] = "val_mtp_nats_per_token";
inline constexpr char kSteps[] = "steps";
inline constexpr char kTokens[] = "tokens";
inline constexpr char kEpochs[] = "epochs";
inline constexpr char kTrainSeconds[] = "train_seconds";
inline constexpr char kTokensPerS[] = "tokens_per_s";
inline constexpr char kMfu[] = "mfu";
inline constexpr char kParams[] = "params";
inline constexpr char kActiveParams[] = "active_params";
inline constexpr char kMtpParams[] = "mtp_params";
inline constexpr char kPeakMemoryBytes[] = "peak_memory_bytes";
inline constexpr char kKvCacheBytesPerToken[] = "kv_cache_bytes_per_token";
inline constexpr char kFinalTrainLoss[] = "final_train_loss";
inline constexpr char kFinalLr[] = "final_lr";
inline constexpr char kCudaGraphs[] = "cuda_graphs";
inline constexpr char kActivations[] = "activations";
inline constexpr char kDevice[] = "device";
inline constexpr char kDeviceClass[] = "device_class";
inline constexpr char kConfig[] = "config";
inline constexpr char kModel[] = "model";
inline constexpr char kDataset[] = "dataset";
inline constexpr char kSeed[] = "seed";
inline constexpr char kRouting[] = "routing";
inline constexpr char kRoutingTokensPerExpert[] = "tokens_per_expert";
inline constexpr char kRoutingMaxOverMeanLoad[] = "max_over_mean_load";
inline constexpr char kResumes[] = "resumes";
inline constexpr char kGenerationTokens[] = "generation_tokens";
inline constexpr char kGenerationTokensPerS[] = "generation_tokens_per_s";
// A diverged result's own keys; it shares steps, train_seconds, device,
// device_class, config, dataset and seed with RunResult.
inline constexpr char kDiverged[] = "diverged";
inline constexpr char kDivergedStep[] = "diverged_step";
inline constexpr char kLastFiniteLoss[] = "last_finite_loss";
}  // namespace result_keys

// A mixture of experts' routing at the last training step.
struct RoutingResult {
  std::vector<double> tokens_per_expert;  // tokens each expert got, summed over MoE layers
  double max_over_mean_load = 0;          // the worst layer's max/mean tokens per expert

  bool operator==(const RoutingResult&) const = default;
};

// One finished run. Only val_nats_per_byte is required: a field that is
// nullopt was not in the JSON (results written by earlier versions lack the
// newer ones). The trainer fills every field but the MTP ones of a model
// without multi-token prediction (and mfu where the peak is unknown).
struct RunResult {
  // Evaluation on the validation text (docs/validation.md).
  double val_nats_per_byte = 0;
  std::optional<double> val_nats_per_token;
  std::optional<double> val_bits_per_byte;
  std::optional<int64_t> eval_batches;  // ⌈spans / 16⌉
  std::optional<int64_t> eval_spans;
  std::optional<int64_t> eval_tokens;   // targets scored
  std::optional<std::string> eval_fingerprint;  // SHA-256 hex of the scored targets
  // Multi-token prediction: depth d's validation loss at d − 1, nats/token.
  std::optional<std::vector<double>> val_mtp_nats_per_token;
  // Training.
  std::optional<int64_t> steps;  // optimizer steps done
  std::optional<int64_t> tokens;  // training tokens: steps · B · T
  std::optional<double> epochs;
  std::optional<double> train_seconds;  // graph captures excluded
  std::optional<double> tokens_per_s;
  std::optional<double> mfu;  // a fraction of the device's peak; nullopt: peak unknown
  std::optional<int64_t> params;         // every trained one, the MTP depths' left out
  std::optional<int64_t> active_params;  // those a token uses (MoE); = params when dense
  std::optional<int64_t> mtp_params;     // the MTP depths', with mtp > 0
  std::optional<int64_t> peak_memory_bytes;
  std::optional<int64_t> kv_cache_bytes_per_token;
  std::optional<double> final_train_loss;  // nats/token
  std::optional<double> final_lr;
  std::optional<bool> cuda_graphs;         // steps replayed from graphs
  std::optional<std::string> activations;  // "f32" or "bf16"
  std::optional<std::string> device;        // the worker's name for it: "cpu", "cuda:1"
  std::optional<std::string> device_class;  // "NVIDIA H200", the CPU's model name
  nlohmann::json config;  // the run spec it trained (RunSpec::ToJson); null when absent
  nlohmann::json model;   // its model config (ModelConfig::ToJson); null when absent
  std::optional<std::string> dataset;  // the dataset's content hash
  std::optional<int64_t> seed;
  std::optional<RoutingResult> routing;  // nullopt: a dense model
  std::optional<int64_t> resumes;        // runs continued from a checkpoint
  std::optional<int64_t> generation_tokens;      // greedy tokens measured
  std::optional<double> generation_tokens_per_s;  // batch 1, with the cache
  // Keys this version does not read, and known keys whose values have not
  // their type, as they were: ToJson writes them back.
  nlohmann::json extra = nlohmann::json::object();

  // The JSON: every field that has a value; mfu and routing always (null
  // when nullopt, as the trainer writes them); then `extra`'s keys.
  nlohmann::json ToJson() const;

  // The coordinator's check (Complete): `j` must be an object with a
  // finite number ≥ 0 `val_nats_per_byte`; where present, `train_seconds`,
  // `val_nats_per_token`, `val_bits_per_byte`, `tokens_per_s`, `epochs`,
  // `generation_tokens_per_s` must be finite numbers ≥ 0; `steps`, `tokens`,
  // `params`, `seed`, `eval_batches`, `kv_cache_bytes_per_token` integers
  // ≥ 0; `device`, `device_class`, `eval_fingerprint` strings of at most 256
  // bytes. InvalidArgument naming the first field that is not, and what was
  // expected ("result_json: \"steps\" must be an integer ≥ 0"). Any other
  // field is read where it has its type and kept in `extra` where it has
  // not; unknown keys go to `extra`.
  static absl::StatusOr<RunResult> FromJson(const nlohmann::json& j);

  // A stored result, whatever checks it passed when it was written (results
  // stored before Complete checked them may hold anything, and a report
  // never fails on stored data): every field read where it has its type.
  // InvalidArgument only when `j` is not an object with a numeric
  // val_nats_per_byte.
  static absl::StatusOr<RunResult> FromStoredJson(const nlohmann::json& j);

  // FromJson's rules on these values: OK, or its error.
  absl::Status Validate() const;

  bool operator==(const RunResult&) const = default;
};

// A run that diverged (engine/train/trainer.h): where it stopped and why;
// no evaluation, no weights.
struct DivergedResult {
  int64_t diverged_step = 0;                // the progress step that found it
  std::optional<double> last_finite_loss;   // nats/token; nullopt: no loss was finite
  int64_t steps = 0;
  double train_seconds = 0;
  std::string device, device_class;
  nlohmann::json config;  // the run spec (RunSpec::ToJson)
  std::string dataset;    // the dataset's content hash
  int64_t seed = 0;

  // {"diverged": true, "diverged_step", "last_finite_loss" (null when
  // none), "steps", "train_seconds", "device", "device_class", "config",
  // "dataset", "seed"}.
  nlohmann::json ToJson() const;
  // InvalidArgument naming the field unless `j` is an object with
  // "diverged": true and an integer ≥ 0 "diverged_step"; where present,
  // "last_finite_loss" must be a finite number or null, "steps" and "seed"
  // integers ≥ 0, "train_seconds" a finite number ≥ 0, "device",
  // "device_class" and "dataset" strings of at most 256 bytes, "config" an
  // object. Unknown keys are ignored.
  static absl::StatusOr<DivergedResult> FromJson(const nlohmann::json& j);
  absl::Status Validate() const;

  bool operator==(const DivergedResult&) const = default;
};

// Whether `j` is a diverged result: an object whose "diverged" is true.
bool IsDivergedResultJson(const nlohmann::json& j);

}  // namespace smallem

#endif  // SMALLEM_RUNSPEC_RUN_RESULT_H_
