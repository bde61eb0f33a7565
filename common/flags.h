#ifndef PSTRAIN_COMMON_FLAGS_H_
#define PSTRAIN_COMMON_FLAGS_H_

namespace pstrain {

// Rewrites TensorFlow-tutorial flag spellings to gflags' underscore form in
// place: "--job-dir=x" becomes "--job_dir=x", "--train-steps 5" becomes
// "--train_steps 5". Only the name part of an argument that starts with "--"
// is changed; values and positional arguments are left alone. Call before
// gflags::ParseCommandLineFlags.
void NormalizeFlagSpellings(int argc, char** argv);

}  // namespace pstrain

#endif  // PSTRAIN_COMMON_FLAGS_H_
