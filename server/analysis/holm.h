// Holm's correction across the variants of one experiment
// (docs/equal-time.md § Many variants): k comparisons with the baseline,
// each a test of "no difference" at α, make about k·α false better/worse
// verdicts when nothing differs. Holm's step-down keeps the chance of ANY
// false one at most α: sort the two-sided p values, p₍₁₎ ≤ … ≤ p₍ₖ₎; the
// i-th is tested at α/(k − i + 1) while every smaller one was rejected; from
// the first that is not, every later one keeps that first level (none of
// them can reject by its p value).
//
// Thread-safety: pure functions.
#ifndef SMALLEM_SERVER_ANALYSIS_HOLM_H_
#define SMALLEM_SERVER_ANALYSIS_HOLM_H_

#include <optional>
#include <vector>

#include "server/analysis/verdict.h"

namespace smallem {

// The two-sided p value of Δ/SE against Student's t at `df` > 0.
double TwoSidedP(double delta, double se, double df);

// The level each test is judged at, parallel to `p_values`; an unset p (no
// standard error) counts in the family as p = 1. REQUIRES: 0 < alpha < 1.
std::vector<double> HolmLevels(const std::vector<std::optional<double>>& p_values, double alpha);

// Judges each of `family`, parallel to it: at its own Evidence::alpha, or,
// with `holm`, at its Holm level across the family (from the first one's
// alpha, p values from Δ, SE and df).
std::vector<Judgement> JudgeFamily(const std::vector<Evidence>& family, bool holm);

}  // namespace smallem

#endif  // SMALLEM_SERVER_ANALYSIS_HOLM_H_
