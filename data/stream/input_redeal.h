#ifndef PSTRAIN_DATA_STREAM_INPUT_REDEAL_H_
#define PSTRAIN_DATA_STREAM_INPUT_REDEAL_H_

// A restart with another number of replicas: what the replicas of the run
// before had not read, dealt anew.
//
// Every training replica logs where its stream is (data/stream/streamed_batches.h,
// the job dir's input/replica-<r>.txt), with a line saying how many
// replicas there were. A replica that resumes a job (step > 0) with no
// position of its own, while the logs say the job ran with m replicas,
// finds each of those m replicas' position at the step the job resumes from
// (its logged one before it, read forward) and lists what it had left:
//   - the files it was reading, from where its window being handed out
//     began (the examples of that window it had trained are read again: at
//     most one shuffle_buffer, or 1024 without one, per old replica);
//   - the files of its epoch it had not begun;
//   - a replica behind the furthest one: its whole share of the epochs
//     between, so that every file is read as many times as before.
// Piece i of that list goes to new replica i % n, read as one epoch (the
// furthest old replica's) before the usual epochs with n replicas. The plan
// is written to input/deal.txt, so that every replica, and every restart
// with n replicas, uses the same one.

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "common/env.h"
#include "data/stream/example_stream.h"

namespace pstrain {

struct InputDeal {
  uint64_t base = 0;              // StreamBaseFingerprint of the stream's options
  int from_replicas = 0;          // the run before
  int replicas = 0;               // the run it is for
  int64_t step = 0;               // the global step the job resumed at
  int64_t epoch = 0;              // the epoch the pieces complete
  int64_t read_again = 0;         // examples trained before that are read again, at most
  std::vector<FilePiece> pieces;  // piece i goes to replica i % replicas

  // Replica `replica`'s share; its first batch is `step` (sync) or
  // step / replicas (async: a replica's batches are about that).
  RedealShare ShareOf(int replica, bool sync) const;

  std::string ToString() const;
  // DataLoss naming `path` for text ToString did not write.
  static absl::StatusOr<InputDeal> FromString(const std::string& text, const std::string& path);
};

// The deal file of the job dir's input directory `dir`, and replica
// `replica`'s position log there.
std::string DealPath(const std::string& dir);
std::string PositionLogPath(const std::string& dir, int replica);

// The deal in `dir` for `options` (the same files and settings, and as many
// replicas); nullopt without one. DataLoss for a damaged file.
absl::StatusOr<std::optional<InputDeal>> LoadDeal(Env* env, const std::string& dir,
                                                  const ExampleStreamOptions& options);

// Plans the deal for `options` (without a re-deal) at global step `step`
// from the position logs in `dir`, when they were written by a run with
// another number of replicas. nullopt, with `*why_not` saying why (empty:
// no such run), when there is nothing to re-deal or it cannot be planned
// (a log is missing, damaged or written for other settings). Errors of
// reading the input files forward.
absl::StatusOr<std::optional<InputDeal>> PlanDeal(Env* env, const std::string& dir,
                                                  const ExampleStreamOptions& options, int64_t step,
                                                  bool sync, std::string* why_not);

// Writes `deal` to `dir` (atomically) and removes the position logs of
// replicas it has no place for (replica-<r>.txt, r >= deal.replicas), which
// would otherwise be taken for theirs by a later run with more replicas.
absl::Status SaveDeal(Env* env, const std::string& dir, const InputDeal& deal);

// A run of `replicas` that does not read the deal in `dir` (rolled back to
// before it, or one that could not be planned): removes it, and the
// position logs of replicas r >= `replicas`, so that no later run takes
// them for its own.
absl::Status ForgetDeal(Env* env, const std::string& dir, int replicas);

}  // namespace pstrain

#endif  // PSTRAIN_DATA_STREAM_INPUT_REDEAL_H_
