#ifndef PSTRAIN_DATA_FEATURE_HASH_H_
#define PSTRAIN_DATA_FEATURE_HASH_H_

// Hashing of sparse features into buckets, bit-for-bit as TensorFlow does, so
// a table trained here and one trained by TensorFlow agree on which row an id
// or token lands in.
//
// The hash is FarmHash's Fingerprint64 (farmhashna::Hash64, the function
// TensorFlow's tensorflow::Fingerprint64 calls when built with
// USE_OSS_FARMHASH), taken from Debian's libfarmhash-dev as
// util::Fingerprint64. It is a fingerprint: fixed forever, the same on every
// platform, not seeded. Not suitable where an adversary picks the tokens
// (TensorFlow's to_hash_bucket_strong exists for that; not provided here).
// Crossed features combine their values' fingerprints (CrossFingerprint).

#include <cstddef>
#include <cstdint>
#include <string_view>

namespace pstrain {

// FarmHash Fingerprint64 of the bytes of `s`.
uint64_t Fingerprint64(std::string_view s);

// tf.strings.to_hash_bucket_fast(s, num_buckets) (the op
// StringToHashBucketFast): Fingerprint64(s) mod num_buckets, the modulo taken
// on the unsigned 64-bit fingerprint. The result is in [0, num_buckets).
// `num_buckets` must be >= 1 (CHECKed: validate configs before they get here,
// as TensorFlow's op attribute does).
int64_t HashBucketFast(std::string_view s, int64_t num_buckets);

// An integer id hashed as TensorFlow's categorical_column_with_hash_bucket
// hashes an integer feature: it first converts the id with
// tf.strings.as_string (its shortest decimal form: "17", "-3", no leading
// zeros or '+') and then calls to_hash_bucket_fast on that string. So
// HashBucketFastInt64(17, n) == HashBucketFast("17", n).
int64_t HashBucketFastInt64(int64_t id, int64_t num_buckets);

// Crossed features (linear's crosses): a combination of values, one from each
// crossed feature in the cross's order, each in its 64-bit form (an integer
// id's int64 bits, a string's Fingerprint64), becomes one 64-bit value
//
//   h = kCrossHashKey;  for each value v in order: h = FingerprintCat64(h, v)
//
// This is TensorFlow's SparseCross kernel with hashed_output (HashCrosser in
// core/kernels/sparse_cross_op.cc, what tf.sparse.cross_hashed and
// tf.feature_column.crossed_column run) with its default hash_key. The test
// checks it against the numbers TensorFlow's own sparse_cross_op_test
// expects, for the default key and for key + 1. So a bucketed table's row,
// h mod buckets (unsigned), is crossed_column([a, b, ...],
// hash_bucket_size=buckets)'s id for raw string or int64 features a, b, ...
// listed in the same order. A dynamic table takes h's low 63 bits, as it
// takes a token's; TensorFlow's num_buckets 0 takes h mod (2^63 - 1)
// instead, so there the two differ (for about half of all h, by 1). Not
// checked against a running TensorFlow; not tf.sparse.cross_hashed's V2
// (SparseCrossV2), which starts from the first value instead of a key.

// sparse_ops._DEFAULT_HASH_KEY, the hash_key of crossed_column and
// tf.sparse.cross_hashed when none is given.
inline constexpr uint64_t kCrossHashKey = 0xDECAFCAFFE;

// TensorFlow's FingerprintCat64 (core/platform/fingerprint.h): a fingerprint
// of two fingerprints, order-sensitive. Not for adversarial inputs.
constexpr uint64_t FingerprintCat64(uint64_t fp1, uint64_t fp2) {
  constexpr uint64_t kMul = 0xc6a4a7935bd1e995ULL;
  auto shift_mix = [](uint64_t v) { return v ^ (v >> 47); };
  uint64_t result = fp1 ^ kMul;
  result ^= shift_mix(fp2 * kMul) * kMul;
  result *= kMul;
  result = shift_mix(result) * kMul;
  return shift_mix(result);
}

// The 64-bit value of one combination of crossed values, `values[0 .. n)` in
// the cross's order (above). Header-only, so the models need no FarmHash.
inline uint64_t CrossFingerprint(const uint64_t* values, size_t n) {
  uint64_t h = kCrossHashKey;
  for (size_t i = 0; i < n; ++i) h = FingerprintCat64(h, values[i]);
  return h;
}

}  // namespace pstrain

#endif  // PSTRAIN_DATA_FEATURE_HASH_H_
