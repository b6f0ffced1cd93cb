// Learning-rate schedules (see schedule.h for the exact definition of each step's lr).
#include "optim/schedule.h"

#include <algorithm>
#include <cmath>

#include "src/core/error.h"

namespace gdn::optim {

namespace {
constexpr double kPi = 3.14159265358979323846;
}  // namespace

ScheduleKind parse_schedule(const std::string& name) {
  const auto kind = enum_table(ScheduleKind{}).parse(name);
  GDN_CHECK(kind, "unknown lr schedule '", name, "' (expected ",
            enum_table(ScheduleKind{}).choices(), ")");
  return *kind;
}

const char* schedule_name(ScheduleKind kind) {
  return enum_name(kind);
}

void LrSchedule::validate() const {
  GDN_CHECK(max_lr >= 0.0, "lr schedule: max_lr must be >= 0, got ", max_lr);
  GDN_CHECK(min_lr >= 0.0 && min_lr <= max_lr, "lr schedule: min_lr must be in [0, max_lr=", max_lr,
            "], got ", min_lr);
  GDN_CHECK(warmup_steps >= 0, "lr schedule: warmup_steps must be >= 0, got ", warmup_steps);
  GDN_CHECK(total_steps >= 0, "lr schedule: total_steps must be >= 0, got ", total_steps);
  GDN_CHECK(kind == ScheduleKind::constant || total_steps > 0, "lr schedule: ", schedule_name(kind),
            " decay needs total_steps > 0, got ", total_steps);
}

double LrSchedule::lr_at(int64_t step) const {
  validate();
  GDN_CHECK(step >= 0, "lr schedule: step must be >= 0, got ", step);
  if (step < warmup_steps) return max_lr * double(step + 1) / double(warmup_steps);
  if (kind == ScheduleKind::constant) return max_lr;
  const int64_t span = total_steps - 1 - warmup_steps;  // steps from max_lr to min_lr
  double p;                                             // decay progress in [0, 1]
  if (span > 0)
    p = std::clamp(double(step - warmup_steps) / double(span), 0.0, 1.0);
  else
    p = step > warmup_steps ? 1.0 : 0.0;  // one step after warmup: it runs at max_lr
  if (kind == ScheduleKind::cosine)
    return min_lr + (max_lr - min_lr) * 0.5 * (1.0 + std::cos(kPi * p));
  return max_lr + (min_lr - max_lr) * p;
}

}  // namespace gdn::optim
