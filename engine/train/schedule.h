// The learning-rate schedule: linear warmup, then cosine decay to
// lr · min_lr_ratio at the end of the budget. It takes the fraction of the
// budget done — steps done / steps for a steps budget, training seconds /
// budget seconds for a minutes budget — so a timed run also ends decayed.
#ifndef SMALLEM_ENGINE_TRAIN_SCHEDULE_H_
#define SMALLEM_ENGINE_TRAIN_SCHEDULE_H_

namespace smallem {

struct Schedule {
  double lr = 3e-3;
  double warmup = 0.05;       // fraction of the budget
  double min_lr_ratio = 0.1;

  // fraction in [0, 1]; values outside are clamped.
  double At(double fraction) const;
};

}  // namespace smallem

#endif  // SMALLEM_ENGINE_TRAIN_SCHEDULE_H_
