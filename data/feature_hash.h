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
//
// Crossed features (tf.sparse.cross_hashed, crossed_column) are not provided:
// TensorFlow combines the per-feature fingerprints with FingerprintCat64
// starting from an undocumented default hash key, and its documentation gives
// no numeric value to test an implementation against.

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

}  // namespace pstrain

#endif  // PSTRAIN_DATA_FEATURE_HASH_H_
