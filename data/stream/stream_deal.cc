#include "data/stream/stream_deal.h"

#include <algorithm>
#include <utility>

#include "common/hash.h"

namespace pstrain {
namespace {

uint64_t Draw(uint64_t* state, uint64_t n) { return SplitMix64Next(state) % n; }

}  // namespace

std::vector<FilePiece> EpochPieces(const ExampleStreamOptions& o, int64_t epoch) {
  if (o.redeal.has_value() && epoch == o.redeal->epoch) return o.redeal->pieces;
  const size_t replicas = static_cast<size_t>(std::max(1, o.num_replicas));
  std::vector<FilePiece> pieces;
  if (!o.follow_list.empty()) {
    // Following new files: file i of the list goes to replica i %
    // num_replicas (as ListedFilesOf deals the files listed later), the
    // replica's first files in an order drawn from (seed, epoch, replica)
    // with a shuffle_buffer, as the job's position logs have them.
    for (size_t i = 0; i < o.files.size(); ++i) {
      if (o.files.size() < replicas || i % replicas == static_cast<size_t>(o.replica)) {
        pieces.push_back({static_cast<int64_t>(i), 0, 0});
      }
    }
    if (o.shuffle_buffer > 0) {
      uint64_t state = MixBits64(o.seed ^ MixBits64(static_cast<uint64_t>(epoch) + 1) ^
                                 (static_cast<uint64_t>(o.replica) << 32));
      for (size_t i = pieces.size(); i > 1; --i) std::swap(pieces[i - 1], pieces[Draw(&state, i)]);
    }
    return pieces;
  }
  // The epoch's order of every file, the same for every replica, which
  // takes every num_replicas-th file of it.
  std::vector<int64_t> order(o.files.size());
  for (size_t i = 0; i < order.size(); ++i) order[i] = static_cast<int64_t>(i);
  if (o.shuffle_files) {
    uint64_t state = MixBits64(o.seed ^ MixBits64(static_cast<uint64_t>(epoch) + 0xf11e5));
    for (size_t i = order.size(); i > 1; --i) std::swap(order[i - 1], order[Draw(&state, i)]);
  }
  for (size_t k = 0; k < order.size(); ++k) {
    if (order.size() < replicas || k % replicas == static_cast<size_t>(o.replica)) {
      pieces.push_back({order[k], 0, 0});
    }
  }
  return pieces;
}

std::vector<int64_t> WindowOrder(const ExampleStreamOptions& options, int64_t epoch, int64_t window,
                                 int64_t n) {
  std::vector<int64_t> order(n);
  for (int64_t i = 0; i < n; ++i) order[i] = i;
  if (options.shuffle_buffer > 0) {
    uint64_t state = MixBits64(options.seed ^ MixBits64(static_cast<uint64_t>(epoch)) ^
                               MixBits64(static_cast<uint64_t>(window) + 0x5eed) ^
                               static_cast<uint64_t>(options.replica));
    for (int64_t i = n; i > 1; --i) {
      std::swap(order[i - 1], order[Draw(&state, static_cast<uint64_t>(i))]);
    }
  }
  return order;
}

std::vector<std::string> ListedFilesOf(const ExampleStreamOptions& options,
                                       const std::vector<std::string>& listed) {
  std::vector<std::string> files;
  const size_t replicas = static_cast<size_t>(options.num_replicas);
  for (size_t i = static_cast<size_t>(options.replica); i < listed.size(); i += replicas) {
    files.push_back(listed[i]);
  }
  return files;
}

}  // namespace pstrain
