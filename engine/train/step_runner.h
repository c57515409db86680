// StepRunner: the training step as the trainer runs it, with no host work
// beyond choosing it (docs/gpu-notes.md § A training step with no host work).
// Train() and bench/gpu_bench.cc both run their steps through it, so the
// benchmark times the step that training runs.
//
// At Create the training split (S tokens) is uploaded to the device once, as
// i32. Each Run is then one step:
//   host   — wait until the previous step's upload has read the staging
//            memory (Backend::WaitStaged), write the batch's B sequence
//            starts and the optimizer's scalars (Optimizer::Prepare) there;
//   device — one upload of that block, gather_sequences (inputs and targets
//            from the resident split), ZeroGrad, forward, backward, mean
//            loss, Optimizer::Update.
// The device half runs eagerly for the first kWarmupSteps steps, which bring
// the arena, the backend's scratch and staging buffers and its GEMM plans to
// their final size; after them the arena refuses to grow. With graphs on a
// backend that has them, each update variant (Optimizer::UpdateVariant) is
// captured (Backend::CaptureGraph) the first time it comes after the
// warm-up, once it has run eagerly, and replayed with one LaunchGraph from
// then on. Without graphs every step is eager: the same calls, the same
// numbers.
//
// Nothing is read back per step: ReadLoss copies the last step's loss to the
// host (synchronizing) when the caller wants it.
//
// Divergence is checked on the device every step, eager or replayed: the
// step adds 0·loss and 0·‖g‖² (the gradient's squared norm) to a flag that
// lives on the device. While both are finite the flag stays 0; 0·inf and
// 0·NaN are NaN, and NaN sticks. StepsFinite reads the flag when the caller
// wants it (at progress steps), so a captured step needs no host read.
//
// The runner borrows the model, optimizer, arena and tape, which must
// outlive it; it owns the resident split, the staging memory and the graphs
// (released by Release or the destructor, before the memory they replay on).
// The arena is reset by every step: tensors allocated from it between steps
// are overwritten by the next one. Not thread-safe; one runner at a time
// per backend (graphs are released backend-wide).
#ifndef SMALLEM_ENGINE_TRAIN_STEP_RUNNER_H_
#define SMALLEM_ENGINE_TRAIN_STEP_RUNNER_H_

#include <cstdint>
#include <map>
#include <memory>
#include <set>
#include <span>

#include "absl/status/statusor.h"
#include "engine/arena.h"
#include "engine/autograd/tape.h"
#include "engine/backend.h"
#include "engine/model/model.h"
#include "engine/optim/optimizer.h"

namespace smallem {

// Eager steps before the first captured one (see above).
inline constexpr int64_t kWarmupSteps = 3;

class StepRunner {
 public:
  struct Options {
    int64_t batch = 0;  // B sequences per step
    int64_t time = 0;   // T tokens per sequence
    // Capture and replay steps after the warm-up where the backend supports
    // graphs; false runs every step eagerly.
    bool graphs = true;
  };

  // Uploads `split` (S tokens, S > T + 1 and S < 2^31, checked by the
  // caller with a clear error) and allocates the step's device and staging
  // memory. Fails only when the backend cannot allocate (out of memory).
  static absl::StatusOr<std::unique_ptr<StepRunner>> Create(Model& model, Optimizer& optimizer,
                                                            Arena& arena, Tape& tape,
                                                            std::span<const uint16_t> split,
                                                            const Options& options);
  ~StepRunner();
  StepRunner(const StepRunner&) = delete;
  StepRunner& operator=(const StepRunner&) = delete;

  // Runs step `step` (0-based: the count of steps this runner has run) on
  // the sequences starting at `starts` (B offsets into the split, each with
  // T + 1 tokens after it) with the schedule's learning-rate multiplier.
  // Returns when the step is enqueued. Fails only when a graph cannot be
  // captured (e.g. out of memory); the step then has not run.
  absl::Status Run(int64_t step, std::span<const int64_t> starts, float lr_multiplier);

  // The last step's mean training loss (nats/token; with multi-token
  // prediction the next-token loss alone, not the objective the step
  // minimized); waits for it. NaN before the first step.
  float ReadLoss();

  // Whether every step so far had a finite loss and a finite gradient norm
  // (the device flag above); waits for the steps queued so far. True before
  // the first step.
  bool StepsFinite();

  // Seconds the last Run spent capturing a graph (0 when it captured none):
  // like compilation, not training time.
  double last_capture_seconds() const { return last_capture_s_; }
  // The model it trains (its routing statistics, at progress steps).
  const Model& model() const { return model_; }
  // Whether any step was captured (and so replayed).
  bool graphs_used() const { return !graphs_.empty(); }

  // Destroys the graphs (after the steps queued so far) and lets the arena
  // grow again, for work after training (evaluation). Run must not be called
  // afterwards. Idempotent; the destructor calls it.
  void Release();

 private:
  StepRunner(Model& model, Optimizer& optimizer, Arena& arena, Tape& tape,
             const Options& options);
  absl::Status AllocateInputs(std::span<const uint16_t> split);
  // The flag's block (below), zeroed.
  absl::Status AllocateHealth();
  // Adds the step's non-finite check to the flag (recorded by RecordStep).
  void RecordHealthCheck();
  // The step's device half, recorded on the tape from scratch each time it
  // runs eagerly or is captured (CaptureGraph may call it twice): the same
  // calls every time, the per-step values coming from the upload.
  void RecordStep();

  Model& model_;
  Optimizer& optimizer_;
  Backend& backend_;
  Arena& arena_;
  Tape& tape_;
  const Options options_;
  const bool use_graphs_;

  Tensor tokens_;   // (S) i32, the training split on the device
  Tensor starts_;   // (B) i32, device, in inputs_device_
  Tensor scalars_;  // (K) f32, device, in inputs_device_ after starts_
  void* inputs_device_ = nullptr;   // starts_ (padded to 64 bytes), scalars_
  void* inputs_staging_ = nullptr;  // the same layout in staging memory
  size_t inputs_bytes_ = 0;
  int32_t* host_starts_ = nullptr;  // (B) in inputs_staging_
  float* host_scalars_ = nullptr;   // (K) in inputs_staging_

  Tensor loss_;  // (1) the last step's mean loss, the same address every step
  // The divergence check's device memory, one 64-byte block:
  void* health_block_ = nullptr;
  Tensor checked_;  // (2) ‖g‖² and a copy of the loss, this step
  Tensor zeros_;    // (2) always 0
  Tensor probe_;    // (2) 0·checked_: 0, or NaN where checked_ is not finite
  Tensor health_;   // (1) Σ probe_ over every step: 0 while all were finite
  std::set<int> eager_variants_;  // update variants that have run eagerly
  std::map<int, int> graphs_;     // update variant → captured graph
  double last_capture_s_ = 0;
  bool released_ = false;
};

}  // namespace smallem

#endif  // SMALLEM_ENGINE_TRAIN_STEP_RUNNER_H_
