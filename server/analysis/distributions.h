// The sampling distributions the comparisons need (docs/equal-time.md
// § Formulas): Student's t for intervals and thresholds, Fisher's F for the
// test of an arm's variance against the others', χ² for the interval of a
// standard deviation. The first two through the
// regularized incomplete beta function I_x(a, b), evaluated by its continued
// fraction (Lentz's method; relative error below 1e-12 in double).
//
// Degrees of freedom are real numbers (Welch–Satterthwaite gives fractions).
//
// Thread-safety: pure functions.
#ifndef SMALLEM_SERVER_ANALYSIS_DISTRIBUTIONS_H_
#define SMALLEM_SERVER_ANALYSIS_DISTRIBUTIONS_H_

namespace smallem {

// I_x(a, b) for 0 ≤ x ≤ 1 and a, b > 0 (CHECKed).
double RegularizedIncompleteBeta(double x, double a, double b);

// P(T ≤ t) for Student's t with `df` > 0 degrees of freedom.
double StudentTCdf(double t, double df);
// The p quantile of Student's t, 0 < p < 1, df > 0 (bisection on the CDF to
// 1e-12 relative).
double StudentTQuantile(double p, double df);

// The regularized lower incomplete gamma P(a, x) for a > 0, x ≥ 0 (CHECKed):
// its series below x = a + 1, its continued fraction above.
double RegularizedLowerGamma(double a, double x);
// P(X ≤ x) for χ² with `df` > 0 degrees of freedom, x ≥ 0; and its p
// quantile, 0 < p < 1 (the interval of a standard deviation).
double ChiSquaredCdf(double x, double df);
double ChiSquaredQuantile(double p, double df);

// P(F ≤ f) for Fisher's F with (d1, d2) degrees of freedom, f ≥ 0.
double FCdf(double f, double d1, double d2);
// The p quantile of F(d1, d2), 0 < p < 1.
double FQuantile(double p, double d1, double d2);

}  // namespace smallem

#endif  // SMALLEM_SERVER_ANALYSIS_DISTRIBUTIONS_H_
