#ifndef PSTRAIN_TESTING_CRASH_ENV_H_
#define PSTRAIN_TESTING_CRASH_ENV_H_

// An in-memory Env that models a disk under a page cache, for tests that a
// writer's files survive a power loss: what a crash keeps is what was synced.
//
// Each file has the bytes written to it (what readers see) and the bytes
// last made durable by its Sync. Each directory has its entries (what ListDir sees) and the entries
// last made durable by SyncDir. A crash (CrashAfter) is taken after a given
// number of steps (each create, append, flush, sync, close, rename, delete
// and directory sync is one); from then on every call that changes
// something fails (Unavailable), and the disk as the crash left it is
// kept in two views, the two ends of what a real file system may show:
//   - kMetadataKept: every rename, create and delete so far reached the
//     disk (the journal was committed just before the power went), but a
//     file's bytes only as far as they were synced: a file renamed into
//     place but never synced comes back empty or cut (ext4 data=writeback);
//   - kMetadataLost: only the directory entries synced reached the disk.
// A writer is crash-safe when in both views each final file is either the
// old file or the whole new one, and a file whose commit returned OK is
// there, whole, in both.
//
// Header-only (a test helper of common/ and data/ tests). Thread-safe.

#include <functional>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/str_cat.h"
#include "absl/synchronization/mutex.h"
#include "common/env.h"

namespace pstrain {
namespace testing_util {

class CrashEnv : public Env {
 public:
  enum class View { kMetadataKept, kMetadataLost };
  // path -> contents.
  using Files = std::map<std::string, std::string>;

  // A file that is there, synced, before the test (an old version).
  void Put(const std::string& path, const std::string& contents) {
    absl::MutexLock lock(&mu_);
    auto inode = std::make_shared<Inode>();
    inode->written = inode->durable = contents;
    names_[path] = inode;
    durable_names_[path] = inode;
  }

  // Crashes after `steps` more steps from now (0: at once).
  void CrashAfter(int steps) {
    absl::MutexLock lock(&mu_);
    crash_at_ = steps_ + steps;
    if (steps == 0) CrashLocked();
  }

  // The steps taken so far: run a writer once without a crash to learn how
  // many a crash can come after.
  int steps() const {
    absl::MutexLock lock(&mu_);
    return steps_;
  }
  bool crashed() const {
    absl::MutexLock lock(&mu_);
    return crashed_;
  }

  // The files as readers see them now (no crash).
  Files Live() const {
    absl::MutexLock lock(&mu_);
    Files files;
    for (const auto& [path, inode] : names_) files[path] = inode->written;
    return files;
  }

  // The files as a restart after the crash finds them. Before a crash: as
  // a crash now would leave them.
  Files AfterCrash(View view) const {
    absl::MutexLock lock(&mu_);
    if (crashed_) return view == View::kMetadataKept ? kept_ : lost_;
    return ViewLocked(view);
  }

  absl::StatusOr<std::string> ReadFile(const std::string& path) override {
    absl::MutexLock lock(&mu_);
    auto it = names_.find(path);
    if (it == names_.end()) return absl::NotFoundError(absl::StrCat("cannot open ", path));
    return it->second->written;
  }

  absl::StatusOr<std::unique_ptr<WritableFile>> NewWritableFile(const std::string& path) override {
    absl::MutexLock lock(&mu_);
    if (crashed_) return Crashed(path);
    auto inode = std::make_shared<Inode>();
    names_[path] = inode;
    StepLocked();
    return std::unique_ptr<WritableFile>(new File(this, path, std::move(inode)));
  }

  bool FileExists(const std::string& path) override {
    absl::MutexLock lock(&mu_);
    if (names_.count(path)) return true;
    auto it = names_.lower_bound(path + "/");
    return it != names_.end() && it->first.rfind(path + "/", 0) == 0;
  }

  absl::StatusOr<uint64_t> FileSize(const std::string& path) override {
    absl::MutexLock lock(&mu_);
    auto it = names_.find(path);
    if (it == names_.end()) return absl::NotFoundError(absl::StrCat("cannot stat ", path));
    return it->second->written.size();
  }

  absl::Status CreateDirs(const std::string&) override { return absl::OkStatus(); }

  absl::StatusOr<std::vector<std::string>> ListDir(const std::string& path) override {
    absl::MutexLock lock(&mu_);
    const std::string prefix = path + "/";
    std::vector<std::string> names;
    for (auto it = names_.lower_bound(prefix); it != names_.end(); ++it) {
      if (it->first.rfind(prefix, 0) != 0) break;
      std::string rest = it->first.substr(prefix.size());
      std::string name = rest.substr(0, rest.find('/'));
      if (names.empty() || names.back() != name) names.push_back(name);
    }
    if (names.empty()) return absl::NotFoundError(absl::StrCat("cannot list ", path));
    return names;
  }

  absl::Status RenameFile(const std::string& from, const std::string& to) override {
    absl::MutexLock lock(&mu_);
    if (crashed_) return Crashed(from);
    auto it = names_.find(from);
    if (it == names_.end()) return absl::NotFoundError(absl::StrCat("cannot rename ", from));
    std::shared_ptr<Inode> inode = it->second;
    names_.erase(it);
    names_[to] = std::move(inode);
    StepLocked();
    return absl::OkStatus();
  }

  absl::Status DeleteFile(const std::string& path) override {
    absl::MutexLock lock(&mu_);
    if (crashed_) return Crashed(path);
    if (names_.erase(path) == 0) return absl::NotFoundError(absl::StrCat("cannot delete ", path));
    StepLocked();
    return absl::OkStatus();
  }

  absl::Status SyncDir(const std::string& dir) override {
    absl::MutexLock lock(&mu_);
    if (crashed_) return Crashed(dir);
    for (auto it = durable_names_.begin(); it != durable_names_.end();) {
      it = DirName(it->first) == dir ? durable_names_.erase(it) : std::next(it);
    }
    for (const auto& [path, inode] : names_) {
      if (DirName(path) == dir) durable_names_[path] = inode;
    }
    StepLocked();
    return absl::OkStatus();
  }

 private:
  struct Inode {
    std::string written;  // what readers see
    std::string durable;  // what a crash keeps
  };

  class File : public WritableFile {
   public:
    File(CrashEnv* env, std::string path, std::shared_ptr<Inode> inode)
        : env_(env), path_(std::move(path)), inode_(std::move(inode)) {}
    absl::Status Append(std::string_view data) override {
      return env_->Change(path_, [&] { inode_->written.append(data); });
    }
    absl::Status Flush() override {
      return env_->Change(path_, [] {});
    }
    absl::Status Sync() override {
      return env_->Change(path_, [&] { inode_->durable = inode_->written; });
    }
    absl::Status Close() override {
      if (closed_) return absl::OkStatus();
      closed_ = true;
      return env_->Change(path_, [] {});
    }

   private:
    CrashEnv* const env_;
    const std::string path_;
    const std::shared_ptr<Inode> inode_;
    bool closed_ = false;
  };

  template <typename F>
  absl::Status Change(const std::string& path, F change) {
    absl::MutexLock lock(&mu_);
    if (crashed_) return Crashed(path);
    change();
    StepLocked();
    return absl::OkStatus();
  }

  static absl::Status Crashed(const std::string& path) {
    return absl::UnavailableError(absl::StrCat(path, ": the machine crashed (a CrashEnv test)"));
  }

  void StepLocked() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) {
    if (++steps_ == crash_at_) CrashLocked();
  }

  void CrashLocked() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) {
    kept_ = ViewLocked(View::kMetadataKept);
    lost_ = ViewLocked(View::kMetadataLost);
    crashed_ = true;
  }

  Files ViewLocked(View view) const ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) {
    Files files;
    for (const auto& [path, inode] : view == View::kMetadataKept ? names_ : durable_names_) {
      files[path] = inode->durable;
    }
    return files;
  }

  mutable absl::Mutex mu_;
  std::map<std::string, std::shared_ptr<Inode>> names_ ABSL_GUARDED_BY(mu_);
  std::map<std::string, std::shared_ptr<Inode>> durable_names_ ABSL_GUARDED_BY(mu_);
  int steps_ ABSL_GUARDED_BY(mu_) = 0;
  int crash_at_ ABSL_GUARDED_BY(mu_) = -1;
  bool crashed_ ABSL_GUARDED_BY(mu_) = false;
  Files kept_ ABSL_GUARDED_BY(mu_);
  Files lost_ ABSL_GUARDED_BY(mu_);
};

// A writer to check against every crash.
struct CrashCase {
  // The files there before (CrashEnv::Put): the old state.
  std::function<void(CrashEnv*)> setup = [](CrashEnv*) {};
  // Writes through `env` (crashes come as its errors).
  std::function<absl::Status(Env*)> write;
  // The files become visible together: none has its new contents after a
  // crash unless every other one has, or is whole under its temp name
  // (checked in the view kMetadataKept, where the order of the steps shows).
  bool together = false;
};

// Runs `c.write` once without a crash, to learn its steps and the files it
// makes (the new state), then once per crash point after 0, 1, ... steps,
// each in a fresh CrashEnv. A file is taken for the whole new one when it
// has its size: a CrashEnv only ever drops a file's tail, and the bytes may
// differ between runs (a protobuf map's order). Returns what is wrong, one line each (at most
// `limit`; empty: crash-safe): a file that after a crash, in either view, is
// neither absent-as-before, nor the old file, nor the whole new one; files
// of a `together` write visible before all are whole; after the write
// returned OK, a file not there whole in both views, or a temp file left.
inline std::vector<std::string> CrashViolations(const CrashCase& c, size_t limit = 10) {
  std::vector<std::string> problems;
  const auto problem = [&](std::string p) {
    if (problems.size() < limit) problems.push_back(std::move(p));
  };
  CrashEnv::Files before, after;
  int steps = 0;
  {
    CrashEnv env;
    c.setup(&env);
    before = env.Live();
    if (absl::Status s = c.write(&env); !s.ok()) {
      return {absl::StrCat("the write fails without a crash: ", s.ToString())};
    }
    steps = env.steps();
    after = env.Live();
  }
  const auto is_temp = [](const std::string& path) {
    const std::string name = path.substr(path.find_last_of('/') + 1);
    return CommittedNameOfTemp(name).has_value() || name.find(".tmp") != std::string::npos;
  };
  std::vector<std::string> finals;
  for (const auto& [path, contents] : after) {
    if (is_temp(path)) {
      problem(absl::StrCat("temp file ", path, " is left after the write returned OK"));
    } else if (before.count(path) == 0 || before.at(path) != contents) {
      finals.push_back(path);
    }
  }
  if (finals.empty()) problem("the write changed no file");
  for (int k = 0; k <= steps; ++k) {
    CrashEnv env;
    c.setup(&env);
    env.CrashAfter(k);
    const absl::Status written = c.write(&env);
    if (!env.crashed()) {
      problem(absl::StrCat("crash after ", k, " steps: never reached (", written.ToString(), ")"));
      continue;
    }
    for (CrashEnv::View view : {CrashEnv::View::kMetadataKept, CrashEnv::View::kMetadataLost}) {
      const CrashEnv::Files disk = env.AfterCrash(view);
      const char* view_name =
          view == CrashEnv::View::kMetadataKept ? "renames kept" : "unsynced renames lost";
      const std::string when = absl::StrCat("crash after ", k, " of ", steps, " steps (", view_name,
                                            ", write returned ", written.ToString(), "): ");
      size_t fresh = 0;
      std::vector<std::string> stale;
      for (const std::string& path : finals) {
        auto it = disk.find(path);
        const bool was = before.count(path) > 0;
        if (it == disk.end()) {
          if (was) problem(absl::StrCat(when, path, " is gone"));
          if (written.ok()) problem(absl::StrCat(when, path, " is missing after its commit"));
          stale.push_back(path);
        } else if (was && it->second == before.at(path)) {
          if (written.ok()) problem(absl::StrCat(when, path, " is the old file after its commit"));
          stale.push_back(path);
        } else if (it->second.size() == after.at(path).size()) {
          ++fresh;
        } else {
          problem(absl::StrCat(
              when, path, " holds ", it->second.size(), " bytes, neither ",
              was ? absl::StrCat("the old file's ", before.at(path).size()) : std::string("absent"),
              " nor the new one's ", after.at(path).size()));
        }
      }
      // Visible files of a set: every other one is whole under a temp name
      // (the order of the steps; seen where every rename and create is kept).
      if (!c.together || fresh == 0 || view != CrashEnv::View::kMetadataKept) continue;
      for (const std::string& path : stale) {
        bool pending = false;
        for (const auto& [other, contents] : disk) {
          const std::string name = other.substr(other.find_last_of('/') + 1);
          const std::optional<std::string> final_name = CommittedNameOfTemp(name);
          pending |= final_name && DirName(other) == DirName(path) &&
                     JoinPath(DirName(path), *final_name) == path &&
                     contents.size() == after.at(path).size();
        }
        if (!pending) {
          problem(absl::StrCat(when, fresh, " files of the set are visible but ", path,
                               " is not whole anywhere"));
        }
      }
    }
  }
  return problems;
}

}  // namespace testing_util
}  // namespace pstrain

#endif  // PSTRAIN_TESTING_CRASH_ENV_H_
