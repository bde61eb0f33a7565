// Top-k gradient sparsification with error feedback (Stich et al. 2018,
// "Sparsified SGD with memory"), the wire option `compression: topk`:
// a replica sends each chunk's k largest accumulated gradients (by
// magnitude) as (offset, value) pairs and keeps the rest in a residual that
// is added to its next gradients, so every gradient reaches the parameter
// servers eventually.
//
// Wire form (PushRequest.indices): little-endian uint32 offsets within the
// chunk, strictly increasing, one per value in PushRequest.gradients.
#ifndef PSTRAIN_PS_PROTOCOL_SPARSE_GRADIENTS_H_
#define PSTRAIN_PS_PROTOCOL_SPARSE_GRADIENTS_H_

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "absl/status/status.h"
#include "absl/types/span.h"

namespace pstrain {

// k for a chunk of `size` values: ceil(ratio * size), at least 1 (0 for an
// empty chunk).
int64_t TopKCount(int64_t size, double ratio);

// One chunk's compressor: holds its residual. Not thread-safe.
class TopKCompressor {
 public:
  TopKCompressor(int64_t size, double ratio);

  // residual += grads[0..size); sends the TopKCount largest |residual|:
  // their offsets (ascending) to `indices` and values to `values`, as
  // float32 or, with `bf16`, bfloat16 (the rounding error stays in the
  // residual); the residual keeps what was not sent.
  void Compress(const float* grads, bool bf16, std::string* indices, std::string* values);
  // Forgets the residual (the parameters were rolled back).
  void Reset();

  int64_t size() const { return static_cast<int64_t>(residual_.size()); }
  int64_t k() const { return k_; }
  // Sum of |residual|: what is still to be sent.
  double residual_l1() const;

 private:
  const int64_t k_;
  std::vector<float> residual_;
  std::vector<uint32_t> order_;
};

// Writes the dense gradient of a sparse push: `size` zeros with `values` at
// the offsets in `index_bytes`. InvalidArgument (nothing usable) if the
// offsets are not whole uint32s, not one per value, not strictly
// increasing, or not below `size`.
absl::Status ScatterSparse(std::string_view index_bytes, absl::Span<const float> values,
                           int64_t size, std::vector<float>* dense);

}  // namespace pstrain

#endif  // PSTRAIN_PS_PROTOCOL_SPARSE_GRADIENTS_H_
