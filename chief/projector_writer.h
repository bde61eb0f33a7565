#ifndef PSTRAIN_CHIEF_PROJECTOR_WRITER_H_
#define PSTRAIN_CHIEF_PROJECTOR_WRITER_H_

#include <functional>
#include <string>
#include <thread>

#include "absl/base/thread_annotations.h"
#include "absl/synchronization/mutex.h"

namespace pstrain {

// Writes TensorBoard's projector files (io/projector.h) from checkpoints on
// a thread of its own, so that the checkpoint thread, and the checkpoints'
// cadence, never wait for them (a big table's rows take a second to read):
// the newest checkpoint queued is written next, and one queued meanwhile
// replaces an older one not yet started. Thread-safe.
class ProjectorWriter {
 public:
  // `write` writes the files for one checkpoint (a prefix or index path)
  // and reports its own failures; it runs on the writer's thread.
  explicit ProjectorWriter(std::function<void(const std::string&)> write);
  // Finishes the write in progress, skips the queued one.
  ~ProjectorWriter();
  ProjectorWriter(const ProjectorWriter&) = delete;
  ProjectorWriter& operator=(const ProjectorWriter&) = delete;

  void Queue(std::string checkpoint);
  // Returns once the queued and running writes are done (the job's end).
  void Drain();

 private:
  void Loop();

  const std::function<void(const std::string&)> write_;
  absl::Mutex mu_;
  std::string next_ ABSL_GUARDED_BY(mu_);  // empty: nothing queued
  bool busy_ ABSL_GUARDED_BY(mu_) = false;
  bool stop_ ABSL_GUARDED_BY(mu_) = false;
  std::thread thread_;  // last: started once the members above exist
};

}  // namespace pstrain

#endif  // PSTRAIN_CHIEF_PROJECTOR_WRITER_H_
