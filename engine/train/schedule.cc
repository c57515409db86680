#include "engine/train/schedule.h"

#include <algorithm>
#include <cmath>

namespace smallem {

double Schedule::At(double fraction) const {
  const double f = std::clamp(fraction, 0.0, 1.0);
  if (warmup > 0 && f < warmup) return lr * (f / warmup);
  const double progress = warmup >= 1 ? 1.0 : (f - warmup) / (1.0 - warmup);
  const double floor = lr * min_lr_ratio;
  return floor + 0.5 * (lr - floor) * (1.0 + std::cos(M_PI * progress));
}

}  // namespace smallem
