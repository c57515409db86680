// RunSpec: everything that determines one training run — model, optimizer,
// data, budget, seed. It is the unit the coordinator queues (as canonical
// JSON) and what `smallemctl train` builds from its flags. JSON keys are the
// command-line names with '-' → '_' (docs/architecture.md § The formats):
//   {"data":"data/default","arch":"gpt2","norm":"rms","feed_forward":"swiglu",
//    "positions":"rope","layers":4,"heads":4,"embed":128,"context":128,
//    "batch":16,"steps":300,"optimizer":"adamw","lr":0.003,"seed":1, ...}
#ifndef SMALLEM_RUNSPEC_RUN_SPEC_H_
#define SMALLEM_RUNSPEC_RUN_SPEC_H_

#include <cstdint>
#include <optional>
#include <string>

#include "absl/status/statusor.h"
#include "nlohmann/json_fwd.hpp"
#include "runspec/model_config.h"

namespace smallem {

struct Budget {
  std::optional<int64_t> steps;   // fixed number of optimizer steps
  std::optional<double> minutes;  // fixed training time (equal-time protocol)

  bool operator==(const Budget&) const = default;
};

struct RunSpec {
  std::string data;  // prepared dataset directory
  // Model shape; vocab comes from the dataset.
  int64_t layers = 4, heads = 4, embed = 128, context = 128;
  Architecture architecture = Architecture::Gpt2();
  // Multi-token prediction (engine/model/mtp.h): extra depths, 0 = none, and
  // the weight of their mean loss. In the canonical JSON only when mtp > 0
  // (mtp_weight with it), so specs without it keep their hashes.
  int64_t mtp = 0;
  double mtp_weight = 0.3;
  // Mixture of experts (runspec/moe_config.h); keys experts, top_k,
  // shared_experts, expert_width, moe_every, first_dense, balance,
  // bias_rate, aux_coefficient, in the JSON only when experts > 0.
  // `feed_forward: moe` means experts = 8 unless given, the experts keeping
  // the preset's (or feed_forward's) activation.
  MoeConfig moe;
  int64_t batch = 16;  // B: sequences per step
  Budget budget{.steps = 200, .minutes = std::nullopt};
  // "adamw" or "muon[:short][,period=K][,norm][,boost=G][,stack=off]"
  // (runspec/optimizer_spec.h).
  std::string optimizer = "adamw";
  double lr = 3e-3;            // peak rate: AdamW's, and by default Muon's
  // Muon's peak rate for the hidden matrices; unset = lr. Muon scales its
  // orthogonalized update by 0.18·√max(rows, cols) to RMS 0.18, about
  // AdamW's, precisely so that it can reuse AdamW's rate (docs/muon.md).
  std::optional<double> muon_lr;
  double min_lr_ratio = 0.1;   // the schedule decays to lr · min_lr_ratio
  double warmup = 0.05;        // fraction of the budget spent warming up
  double weight_decay = 0.1;
  double beta1 = 0.9, beta2 = 0.95;
  double grad_clip = 1.0;      // max global gradient norm, 0 = off
  // The validation text is K = eval_batches batches of 16 spans of 64 target
  // tokens, whatever the batch and context (docs/validation.md).
  int64_t eval_batches = 200;
  // Windows per evaluation forward pass: memory and speed only; the scored
  // targets do not depend on it, the loss only up to float rounding.
  int64_t eval_batch_size = 16;
  int64_t seed = 1;
  // Minutes of training between two checkpoints (engine/train/checkpoint.h),
  // fractions allowed; 0 = none. It decides when state is saved, never what
  // is computed, so the canonical JSON carries it only when it differs from
  // the default (specs written before it existed keep their hashes).
  static constexpr double kDefaultCheckpointMinutes = 10;
  double checkpoint_minutes = kDefaultCheckpointMinutes;

  ModelConfig ModelFor(int64_t vocab) const;
  // Muon's peak rate: muon_lr when set, else lr.
  double MuonLr() const { return muon_lr.value_or(lr); }
  // Every constraint that does not need the dataset; errors name the key.
  absl::Status Validate() const;

  // Canonical JSON: every key, fixed order and formatting, so equal specs
  // hash equally. Keys: see the file comment; `steps`, `minutes` and
  // `muon_lr` only when set, `checkpoint_minutes` only when not 10, `attention`,
  // `kv_latent`, `rope_dim` and `q_latent` only when attention is latent,
  // `mtp` and `mtp_weight` only when mtp > 0.
  nlohmann::json ToJson() const;
  // Accepts "arch" (a preset) plus per-piece overrides; unknown keys and
  // wrong types are errors naming the key.
  static absl::StatusOr<RunSpec> FromJson(const nlohmann::json& j);
};

}  // namespace smallem

#endif  // SMALLEM_RUNSPEC_RUN_SPEC_H_
