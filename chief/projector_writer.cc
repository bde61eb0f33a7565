#include "chief/projector_writer.h"

#include <utility>

namespace pstrain {

ProjectorWriter::ProjectorWriter(std::function<void(const std::string&)> write)
    : write_(std::move(write)), thread_([this] { Loop(); }) {}

ProjectorWriter::~ProjectorWriter() {
  {
    absl::MutexLock lock(&mu_);
    stop_ = true;
  }
  thread_.join();
}

void ProjectorWriter::Queue(std::string checkpoint) {
  absl::MutexLock lock(&mu_);
  next_ = std::move(checkpoint);
}

void ProjectorWriter::Drain() {
  absl::MutexLock lock(&mu_);
  auto idle = [this]() ABSL_NO_THREAD_SAFETY_ANALYSIS { return next_.empty() && !busy_; };
  mu_.Await(absl::Condition(&idle));
}

void ProjectorWriter::Loop() {
  for (;;) {
    std::string checkpoint;
    {
      absl::MutexLock lock(&mu_);
      auto ready = [this]() ABSL_NO_THREAD_SAFETY_ANALYSIS { return stop_ || !next_.empty(); };
      mu_.Await(absl::Condition(&ready));
      if (stop_) return;
      checkpoint = std::move(next_);
      next_.clear();
      busy_ = true;
    }
    write_(checkpoint);
    absl::MutexLock lock(&mu_);
    busy_ = false;
  }
}

}  // namespace pstrain
