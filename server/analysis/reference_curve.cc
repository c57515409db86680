#include "server/analysis/reference_curve.h"

#include <algorithm>
#include <cmath>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "base/check.h"
#include "runspec/grid.h"

namespace smallem {
namespace {

absl::Status CheckPoints(std::vector<CurvePoint>& points) {
  if (points.size() < 2) {
    return absl::InvalidArgumentError(
        absl::StrCat("a reference curve needs at least two points (got ", points.size(), ")"));
  }
  for (const CurvePoint& p : points) {
    if (!(p.seconds > 0) || !std::isfinite(p.seconds)) {
      return absl::InvalidArgumentError(absl::StrCat("reference point at ", BudgetLabel(p.budget),
                                                     " has training time ", p.seconds,
                                                     " s; times must be positive"));
    }
    if (!std::isfinite(p.loss)) {
      return absl::InvalidArgumentError(
          absl::StrCat("reference point at ", BudgetLabel(p.budget), " has a non-finite loss"));
    }
  }
  std::sort(points.begin(), points.end(),
            [](const CurvePoint& a, const CurvePoint& b) { return a.seconds < b.seconds; });
  for (size_t i = 1; i < points.size(); ++i) {
    if (points[i].seconds == points[i - 1].seconds) {
      return absl::InvalidArgumentError(
          absl::StrCat("reference points at ", BudgetLabel(points[i - 1].budget), " and ",
                       BudgetLabel(points[i].budget), " took the same training time (",
                       points[i].seconds, " s): the curve cannot be interpolated there"));
    }
  }
  return absl::OkStatus();
}

}  // namespace

const char* CurveModelName(CurveModel model) {
  switch (model) {
    case CurveModel::kChord: return "chord in log time";
    case CurveModel::kPchip: return "PCHIP in log time";
    case CurveModel::kFit: return "fit";
    case CurveModel::kFitThroughPoints: return "fit through the points";
  }
  return "?";
}

absl::StatusOr<TimeCurve> TimeCurve::Create(std::vector<CurvePoint> points) {
  return Build(std::move(points), CurveModel::kChord);
}

absl::StatusOr<TimeCurve> TimeCurve::Build(std::vector<CurvePoint> points, CurveModel model,
                                           Form form) {
  return BuildFrom(std::move(points), model, form, nullptr);
}

TimeCurve TimeCurve::ThroughPoints() const {
  CHECK(model_ == CurveModel::kFit && fit_) << "ThroughPoints of a " << CurveModelName(model_);
  TimeCurve out = *this;
  out.model_ = CurveModel::kFitThroughPoints;
  std::vector<double> log_ts;
  for (const CurvePoint& p : points_) log_ts.push_back(std::log(p.seconds));
  out.pchip_.emplace(log_ts, Residuals());
  return out;
}

absl::StatusOr<TimeCurve> TimeCurve::RefitNear(std::vector<CurvePoint> points) const {
  if (fit_) {
    absl::StatusOr<TimeCurve> near = BuildFrom(points, model_, form_, &*fit_);
    if (near.ok() || absl::IsInvalidArgument(near.status())) return near;
  }
  return Build(std::move(points), model_, form_);
}

absl::StatusOr<TimeCurve> TimeCurve::BuildFrom(std::vector<CurvePoint> points, CurveModel model,
                                               Form form, const FormFit* near) {
  if (absl::Status st = CheckPoints(points); !st.ok()) return st;
  TimeCurve curve(std::move(points), model, form);
  std::vector<double> log_ts, ls, ts, ws;
  for (const CurvePoint& p : curve.points_) {
    log_ts.push_back(std::log(p.seconds));
    ts.push_back(p.seconds);
    ls.push_back(p.loss);
    // ∝ 1/variance of the point's mean under one seed-to-seed noise.
    ws.push_back(static_cast<double>(std::max<size_t>(1, p.seed_losses.size())));
  }
  if (model == CurveModel::kPchip) curve.pchip_.emplace(log_ts, ls);
  if (model == CurveModel::kFit || model == CurveModel::kFitThroughPoints) {
    curve.fit_ = near != nullptr ? RefitFormNear(*near, ts, ls, ws) : FitForm(form, ts, ls, ws);
    if (!curve.fit_) {
      return absl::FailedPreconditionError(absl::StrFormat(
          "no decreasing %s fits %d reference points (it needs %d and a falling loss)",
          FormName(form), static_cast<int>(ts.size()), FormParameters(form)));
    }
    if (model == CurveModel::kFitThroughPoints) {
      std::vector<double> residuals;
      for (size_t i = 0; i < ts.size(); ++i) residuals.push_back(ls[i] - curve.fit_->Value(ts[i]));
      curve.pchip_.emplace(log_ts, residuals);
    }
  }
  return curve;
}

std::vector<double> TimeCurve::Residuals() const {
  std::vector<double> out;
  for (const CurvePoint& p : points_) out.push_back(fit_ ? p.loss - fit_->Value(p.seconds) : 0.0);
  return out;
}

std::string TimeCurve::Describe() const {
  if (!fit_) return CurveModelName(model_);
  std::string s =
      fit_->form == Form::kLogLinear
          ? absl::StrFormat("log-linear fit: L(t_ref) = %.4f, A = %.4f per unit of ln t, t_ref = %.1f s",
                            fit_->l_inf, fit_->a, fit_->t_ref)
          : absl::StrFormat("%s fit: L∞ = %.4f, A = %.4f at t_ref = %.1f s, α = %.3f",
                                  FormName(fit_->form), fit_->l_inf, fit_->a, fit_->t_ref,
                                  fit_->alpha);
  if (fit_->form == Form::kPlateau) absl::StrAppend(&s, absl::StrFormat(", t₀ = %.1f s", fit_->t0));
  if (fit_->form == Form::kBrokenPowerLaw) {
    absl::StrAppend(&s, absl::StrFormat(", t₀ = %.1f s, β = %.2f", fit_->t0, fit_->beta));
  }
  if (model_ == CurveModel::kFitThroughPoints) {
    absl::StrAppend(&s, ", its residuals interpolated (PCHIP in log time) through the points");
  }
  return s;
}

double TimeCurve::Inner(double seconds, double* slope) const {
  const double x = std::log(seconds);
  switch (model_) {
    case CurveModel::kChord: {
      size_t i = 0;
      if (seconds > last_seconds()) {
        i = points_.size() - 2;
      } else if (seconds >= first_seconds()) {
        while (i + 2 < points_.size() && points_[i + 1].seconds <= seconds) ++i;
      }
      const CurvePoint& a = points_[i];
      const CurvePoint& b = points_[i + 1];
      const double per_log = (b.loss - a.loss) / (std::log(b.seconds) - std::log(a.seconds));
      *slope = per_log / seconds;
      if (seconds == a.seconds) return a.loss;
      if (seconds == b.seconds) return b.loss;
      double v = a.loss + (x - std::log(a.seconds)) * per_log;
      // Rounding must not step outside the segment: monotone between points.
      if (seconds >= a.seconds && seconds <= b.seconds) {
        v = std::clamp(v, std::min(a.loss, b.loss), std::max(a.loss, b.loss));
      }
      return v;
    }
    case CurveModel::kPchip:
      *slope = pchip_->Slope(x) / seconds;
      return pchip_->Value(x);
    case CurveModel::kFit:
      *slope = fit_->Slope(seconds);
      return fit_->Value(seconds);
    case CurveModel::kFitThroughPoints: {
      // Outside the points the end residual is held, not extended.
      const double xc = std::clamp(x, std::log(first_seconds()), std::log(last_seconds()));
      const bool inside = xc == x;
      *slope = fit_->Slope(seconds) + (inside ? pchip_->Slope(x) / seconds : 0.0);
      return fit_->Value(seconds) + pchip_->Value(xc);
    }
  }
  CHECK(false) << "unknown CurveModel";
  return 0;
}

Interpolated TimeCurve::Interpolate(double seconds) const {
  CHECK(seconds > 0 && std::isfinite(seconds)) << "training time " << seconds;
  Interpolated out;
  if (seconds < first_seconds()) {
    out.extrapolated = true;
    out.span_ratio = seconds / first_seconds();
  } else if (seconds > last_seconds()) {
    out.extrapolated = true;
    out.span_ratio = seconds / last_seconds();
  }
  out.value = Inner(seconds, &out.slope);
  return out;
}

}  // namespace smallem
