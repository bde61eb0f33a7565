#ifndef PSTRAIN_MODELS_BUILTIN_SPECS_H_
#define PSTRAIN_MODELS_BUILTIN_SPECS_H_

// The spec files of models/specs/, compiled in (the build writes
// builtin_specs.cc from them), so a binary needs no file beside it.

namespace pstrain {

extern const char kMnistCnnSpecYaml[];  // models/specs/mnist_cnn.yaml

}  // namespace pstrain

#endif  // PSTRAIN_MODELS_BUILTIN_SPECS_H_
