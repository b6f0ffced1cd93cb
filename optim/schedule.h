// Learning-rate schedules: a linear warmup followed by constant, cosine or linear decay.
//
// Steps are 0-based optimizer steps (the lr used by the step-th call of Optimizer::step()),
// total_steps is the number of steps in the run (the last one is total_steps - 1):
//   warmup  (step < warmup_steps):   lr_at = max_lr * (step + 1) / warmup_steps
//            (as nanoGPT/llm.c: the first step is already max_lr / warmup_steps, and step
//             warmup_steps - 1 reaches max_lr)
//   decay   (step >= warmup_steps):  p = (step - warmup_steps) / (total_steps - 1 - warmup_steps),
//            clamped to [0, 1] (with at most one step after warmup: p = 0 there, 1 past it);
//              constant: max_lr
//              cosine:   min_lr + (max_lr - min_lr) * (1 + cos(pi p)) / 2
//              linear:   max_lr + (min_lr - max_lr) * p
//   so the first step after warmup runs at max_lr and the last step (total_steps - 1) at min_lr;
//   steps past the end stay at min_lr.
#pragma once
#include <cstdint>
#include <string>

#include "kernels/enum_table.h"

namespace gdn::optim {

enum class ScheduleKind { constant, cosine, linear };
inline constexpr EnumEntry<ScheduleKind> kScheduleNames[] = {{ScheduleKind::constant, "constant"},
                                                             {ScheduleKind::cosine, "cosine"},
                                                             {ScheduleKind::linear, "linear"}};
inline EnumTable<ScheduleKind> enum_table(ScheduleKind) {
  return kScheduleNames;
}

// "constant", "cosine" or "linear"; anything else is an error that names the value.
ScheduleKind parse_schedule(const std::string& name);
const char* schedule_name(ScheduleKind kind);

struct LrSchedule {
  ScheduleKind kind = ScheduleKind::cosine;
  double max_lr = 1e-3;
  double min_lr = 0.0;       // the floor reached at the last step (cosine, linear)
  int64_t warmup_steps = 0;  // 0: no warmup
  int64_t total_steps = 0;   // needed (> 0) by cosine and linear; constant ignores it

  // Checks the fields (lrs >= 0, min_lr <= max_lr, steps >= 0, total_steps > 0 for decays);
  // errors name the field and its value.
  void validate() const;
  // The learning rate for 0-based step `step` (>= 0), as described above.
  double lr_at(int64_t step) const;
};

}  // namespace gdn::optim
