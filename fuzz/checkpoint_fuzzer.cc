// The checkpoint and event readers, on files in memory: a checkpoint index,
// a shard file, the `checkpoint` state file, a whole checkpoint through
// CheckpointReader (index and shard from the input), and an event file.
// The first byte picks the reader; for a whole checkpoint the second says
// where the rest splits into the index and the shard.
#include <cstdint>
#include <string>
#include <vector>

#include "common/env.h"
#include "google/protobuf/stubs/logging.h"
#include "io/checkpoint.h"
#include "io/event_inspect.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  static const bool quiet = [] {
    google::protobuf::SetLogHandler(nullptr);  // "invalid UTF-8" for every such string
    return true;
  }();
  (void)quiet;
  if (size < 2) return 0;
  const std::string rest(reinterpret_cast<const char*>(data) + 2, size - 2);
  pstrain::MemEnv env;
  switch (data[0] % 5) {
    case 0:
      (void)env.WriteFileAtomic("/j/model.ckpt-1.index", rest);
      (void)pstrain::ReadCheckpointIndex(&env, "/j/model.ckpt-1.index");
      break;
    case 1:
      (void)env.WriteFileAtomic("/j/model.ckpt-1.shard-0-of-1", rest);
      (void)pstrain::ReadCheckpointShard(&env, "/j/model.ckpt-1.shard-0-of-1");
      break;
    case 2:
      (void)pstrain::ParseCheckpointState(rest, "/j/checkpoint");
      break;
    case 3: {
      const size_t cut = rest.size() * data[1] / 255;
      (void)env.WriteFileAtomic("/j/model.ckpt-1.index", rest.substr(0, cut));
      (void)env.WriteFileAtomic("/j/model.ckpt-1.shard-0-of-1", rest.substr(cut));
      absl::StatusOr<std::unique_ptr<pstrain::CheckpointReader>> reader =
          pstrain::CheckpointReader::Open(&env, "/j/model.ckpt-1.index");
      if (reader.ok()) {
        const pstrain::CheckpointIndex& index = (*reader)->index();
        // Small models only: the index's sizes are the input's to choose.
        if (index.num_params() >= 0 && index.num_params() <= (1 << 16) && index.num_state() >= 0 &&
            index.num_state() <= (1 << 16)) {
          std::vector<float> params(index.num_params()), state(index.num_state());
          (void)(*reader)->ReadRange(0, index.num_params(), params.data(), {});
          (void)(*reader)->ReadState(state.data());
        }
      }
      break;
    }
    default:
      (void)env.WriteFileAtomic("/logs/events.out.tfevents.1.host", rest);
      (void)pstrain::InspectEventDir(&env, "/logs");
  }
  return 0;
}
