#ifndef PSTRAIN_COMMON_FLAGS_H_
#define PSTRAIN_COMMON_FLAGS_H_

#include <string_view>

namespace pstrain {

// Rewrites TensorFlow-tutorial flag spellings to gflags' underscore form in
// place: "--job-dir=x" becomes "--job_dir=x", "--train-steps 5" becomes
// "--train_steps 5"; TensorFlow's names for pstrain's flags become pstrain's
// ("--checkpoint-num-steps" and "--save_checkpoints_steps" are
// "--checkpoint_steps"). Only the name part of an argument that starts with "--"
// is changed; values and positional arguments are left alone. Call before
// gflags::ParseCommandLineFlags.
void NormalizeFlagSpellings(int argc, char** argv);

// The pstrain name for TensorFlow's name of a setting ("checkpoint_num_steps"
// -> "checkpoint_steps", underscore form), or `name` itself.
std::string_view CanonicalFlagName(std::string_view name);

}  // namespace pstrain

#endif  // PSTRAIN_COMMON_FLAGS_H_
