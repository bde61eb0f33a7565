// What a streamed job keeps of its input (data/stream/streamed_batches.h,
// data/stream/input_redeal.h, data/stream/file_list.h): byte 0 % 3 == 0: the rest is a
// replica's position log (the fingerprint its first line names is the one
// expected); 1: a deal file; 2: an online job's list of files. Whatever
// parses must write back to the same text, and read the same.
#include <cstdint>
#include <cstdlib>
#include <string>
#include <vector>

#include "absl/strings/numbers.h"
#include "absl/strings/str_split.h"
#include "common/env.h"
#include "data/stream/file_list.h"
#include "data/stream/input_redeal.h"
#include "data/stream/streamed_batches.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  if (size < 1) return 0;
  const std::string text(reinterpret_cast<const char*>(data) + 1, size - 1);
  if (data[0] % 3 == 2) {
    pstrain::MemEnv env;
    if (!env.WriteFileAtomic("/files.txt", text).ok()) return 0;
    absl::StatusOr<std::vector<std::string>> files = pstrain::ReadFileList(&env, "/files.txt");
    if (!files.ok()) return 0;
    for (const std::string& f : *files) {
      if (f.empty() || f.find('\n') != std::string::npos) std::abort();
    }
    return 0;
  }
  if (data[0] % 3 == 1) {
    absl::StatusOr<pstrain::InputDeal> deal = pstrain::InputDeal::FromString(text, "/deal.txt");
    if (!deal.ok()) return 0;
    absl::StatusOr<pstrain::InputDeal> again =
        pstrain::InputDeal::FromString(deal->ToString(), "/deal.txt");
    if (!again.ok() || again->ToString() != deal->ToString()) std::abort();
    // Every replica's share holds its pieces once.
    size_t dealt = 0;
    for (int r = 0; r < std::min(deal->replicas, 64); ++r) {
      dealt += deal->ShareOf(r, r % 2 == 0).pieces.size();
    }
    if (deal->replicas <= 64 && dealt != deal->pieces.size()) std::abort();
    return 0;
  }
  pstrain::MemEnv env;
  if (!env.WriteFileAtomic("/log.txt", text).ok()) return 0;
  uint64_t fingerprint = 0;
  const std::string first = text.substr(0, text.find('\n'));
  const size_t space = first.rfind(' ');
  if (space != std::string::npos) (void)absl::SimpleAtoi(first.substr(space + 1), &fingerprint);
  pstrain::InputPositionLog log(&env, "/log.txt", fingerprint, /*every=*/1);
  std::string note;
  if (!log.Load(&note).ok()) return 0;
  const auto last = log.Find(INT64_MAX);
  if (!last.has_value()) return 0;
  absl::StatusOr<pstrain::InputPosition> back =
      pstrain::InputPosition::FromString(last->second.ToString());
  if (!back.ok() || !(*back == last->second)) std::abort();
  // Written again, it reads back the same.
  if (!log.Record(last->first, last->second).ok()) std::abort();
  pstrain::InputPositionLog reread(&env, "/log.txt", fingerprint, 1);
  if (!reread.Load(&note).ok() || !note.empty()) std::abort();
  const auto found = reread.Find(INT64_MAX);
  if (!found.has_value() || found->first != last->first || !(found->second == last->second)) {
    std::abort();
  }
  return 0;
}
