#include "data/stream/input_redeal.h"

#include <algorithm>
#include <map>
#include <memory>
#include <utility>

#include "absl/strings/match.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "absl/strings/str_split.h"
#include "common/status_macros.h"
#include "data/stream/streamed_batches.h"

namespace pstrain {
namespace {

constexpr char kDealHeader[] = "pstrain input deal v1";

// What a position log says it was written for (its "# replica=R
// replicas=N base=B" line); nullopt for a log without one.
struct LogAbout {
  int replica = 0;
  int replicas = 0;
  uint64_t base = 0;
};

std::optional<LogAbout> ReadLogAbout(Env* env, const std::string& path) {
  absl::StatusOr<std::string> text = env->ReadFile(path);
  if (!text.ok()) return std::nullopt;
  std::vector<absl::string_view> lines = absl::StrSplit(*text, absl::MaxSplits('\n', 2));
  if (lines.size() < 2 || !absl::StartsWith(lines[1], "# ")) return std::nullopt;
  LogAbout about;
  int found = 0;
  for (absl::string_view item : absl::StrSplit(lines[1].substr(2), ' ', absl::SkipEmpty())) {
    std::pair<absl::string_view, absl::string_view> kv = absl::StrSplit(item, '=');
    if (kv.first == "replica" && absl::SimpleAtoi(kv.second, &about.replica)) ++found;
    if (kv.first == "replicas" && absl::SimpleAtoi(kv.second, &about.replicas)) ++found;
    if (kv.first == "base" && absl::SimpleAtoi(kv.second, &about.base)) ++found;
  }
  if (found != 3 || about.replicas < 1) return std::nullopt;
  return about;
}

}  // namespace

RedealShare InputDeal::ShareOf(int replica, bool sync) const {
  RedealShare share;
  share.epoch = epoch;
  share.first_batch = sync ? step : step / std::max(1, replicas);
  for (size_t i = static_cast<size_t>(replica); i < pieces.size();
       i += static_cast<size_t>(std::max(1, replicas))) {
    share.pieces.push_back(pieces[i]);
  }
  return share;
}

std::string InputDeal::ToString() const {
  std::string text = absl::StrCat(kDealHeader, "\nbase=", base, " from_replicas=", from_replicas,
                                  " replicas=", replicas, " step=", step, " epoch=", epoch,
                                  " read_again=", read_again, "\n");
  for (const FilePiece& p : pieces)
    absl::StrAppend(&text, p.file, " ", p.offset, " ", p.record, "\n");
  return text;
}

absl::StatusOr<InputDeal> InputDeal::FromString(const std::string& text, const std::string& path) {
  std::vector<absl::string_view> lines = absl::StrSplit(text, '\n', absl::SkipEmpty());
  const auto bad = [&](size_t line, absl::string_view why) {
    return absl::DataLossError(absl::StrCat(path, ": line ", line + 1, ": ", why,
                                            "; delete the file to deal the input again"));
  };
  if (lines.empty() || lines[0] != kDealHeader) return bad(0, "not a pstrain input deal");
  if (lines.size() < 2) return bad(1, "no settings");
  InputDeal deal;
  int found = 0;
  for (absl::string_view item : absl::StrSplit(lines[1], ' ', absl::SkipEmpty())) {
    std::pair<absl::string_view, absl::string_view> kv = absl::StrSplit(item, '=');
    bool ok = false;
    if (kv.first == "base") ok = absl::SimpleAtoi(kv.second, &deal.base);
    if (kv.first == "from_replicas") ok = absl::SimpleAtoi(kv.second, &deal.from_replicas);
    if (kv.first == "replicas") ok = absl::SimpleAtoi(kv.second, &deal.replicas);
    if (kv.first == "step") ok = absl::SimpleAtoi(kv.second, &deal.step);
    if (kv.first == "epoch") ok = absl::SimpleAtoi(kv.second, &deal.epoch);
    if (kv.first == "read_again") ok = absl::SimpleAtoi(kv.second, &deal.read_again);
    if (!ok) return bad(1, absl::StrCat("\"", item, "\" is not a setting"));
    ++found;
  }
  if (found != 6 || deal.replicas < 1 || deal.from_replicas < 1 || deal.step < 0 ||
      deal.epoch < 0) {
    return bad(1, "needs base, from_replicas, replicas, step, epoch and read_again");
  }
  for (size_t i = 2; i < lines.size(); ++i) {
    std::vector<absl::string_view> parts = absl::StrSplit(lines[i], ' ');
    FilePiece p;
    if (parts.size() != 3 || !absl::SimpleAtoi(parts[0], &p.file) ||
        !absl::SimpleAtoi(parts[1], &p.offset) || !absl::SimpleAtoi(parts[2], &p.record) ||
        p.file < 0 || p.record < 0) {
      return bad(i, "not \"file offset record\"");
    }
    deal.pieces.push_back(p);
  }
  return deal;
}

std::string DealPath(const std::string& dir) { return JoinPath(dir, "deal.txt"); }

std::string PositionLogPath(const std::string& dir, int replica) {
  return JoinPath(dir, absl::StrCat("replica-", replica, ".txt"));
}

absl::StatusOr<std::optional<InputDeal>> LoadDeal(Env* env, const std::string& dir,
                                                  const ExampleStreamOptions& options) {
  const std::string path = DealPath(dir);
  if (!env->FileExists(path)) return std::nullopt;
  PSTRAIN_ASSIGN_OR_RETURN(const std::string text, env->ReadFile(path));
  PSTRAIN_ASSIGN_OR_RETURN(InputDeal deal, InputDeal::FromString(text, path));
  if (deal.base != StreamBaseFingerprint(options) || deal.replicas != options.num_replicas) {
    return std::nullopt;
  }
  for (const FilePiece& p : deal.pieces) {
    if (p.file >= static_cast<int64_t>(options.files.size())) {
      return absl::DataLossError(absl::StrCat(path, ": a piece of file ", p.file, " of ",
                                              options.files.size(),
                                              " input files; delete the file to deal the input "
                                              "again"));
    }
  }
  return deal;
}

absl::StatusOr<std::optional<InputDeal>> PlanDeal(Env* env, const std::string& dir,
                                                  const ExampleStreamOptions& options, int64_t step,
                                                  bool sync, std::string* why_not) {
  why_not->clear();
  if (!env->FileExists(dir)) return std::nullopt;
  PSTRAIN_ASSIGN_OR_RETURN(std::vector<std::string> names, env->ListDir(dir));
  const uint64_t base = StreamBaseFingerprint(options);
  // The replica counts of the logs written for these settings, with how
  // many logs each has.
  std::map<int, int> counts;
  for (const std::string& name : names) {
    if (!name.starts_with("replica-") || !name.ends_with(".txt")) continue;
    std::optional<LogAbout> about = ReadLogAbout(env, JoinPath(dir, name));
    if (about.has_value() && about->base == base && about->replicas != options.num_replicas) {
      ++counts[about->replicas];
    }
  }
  if (counts.empty()) return std::nullopt;
  // The run before: the count whose logs are all there (the logs of a run
  // before that were mostly overwritten by it).
  int m = 0;
  for (const auto& [replicas, logs] : counts) {
    if (logs == replicas) m = replicas;
  }
  if (m == 0) {
    std::vector<std::string> found;
    for (const auto& [replicas, logs] : counts) {
      found.push_back(absl::StrCat(logs, " of ", replicas, " replicas"));
    }
    *why_not = absl::StrCat("the position logs in ", dir, " are not all there (",
                            absl::StrJoin(found, ", "), ")");
    return std::nullopt;
  }
  if (options.files.size() < static_cast<size_t>(std::max(m, options.num_replicas))) {
    *why_not = absl::StrCat("fewer files (", options.files.size(),
                            ") than replicas: records, not files, were dealt");
    return std::nullopt;
  }
  ExampleStreamOptions before = options;
  before.num_replicas = m;
  before.log_opens = false;
  before.redeal.reset();
  // The run before may itself have been a re-deal.
  std::optional<InputDeal> earlier;
  if (env->FileExists(DealPath(dir))) {
    absl::StatusOr<std::string> text = env->ReadFile(DealPath(dir));
    if (text.ok()) {
      absl::StatusOr<InputDeal> d = InputDeal::FromString(*text, DealPath(dir));
      if (d.ok() && d->base == base && d->replicas == m) earlier = *std::move(d);
    }
  }
  struct Left {
    std::vector<FilePiece> now;  // what it had left of its epoch
    int64_t epoch = 0;
  };
  std::vector<std::optional<Left>> left(static_cast<size_t>(m));
  bool ended = false;  // some replica's input had ended
  std::vector<ExampleStreamOptions> old(static_cast<size_t>(m), before);
  InputDeal deal;
  deal.base = base;
  deal.from_replicas = m;
  deal.replicas = options.num_replicas;
  deal.step = step;
  for (int j = 0; j < m; ++j) {
    ExampleStreamOptions& o = old[static_cast<size_t>(j)];
    o.replica = j;
    if (earlier.has_value()) o.redeal = earlier->ShareOf(j, sync);
    InputPositionLog log(env, PositionLogPath(dir, j), StreamFingerprint(o));
    std::string note;
    if (!env->FileExists(log.path())) {
      *why_not = absl::StrCat(log.path(), " is missing");
      return std::nullopt;
    }
    if (absl::Status s = log.Load(&note); !s.ok() || !note.empty()) {
      *why_not = s.ok() ? note : std::string(s.message());
      return std::nullopt;
    }
    const int64_t first = sync ? step : step / m;
    if (o.redeal.has_value() && first < o.redeal->first_batch) {
      *why_not =
          absl::StrCat("step ", step, " is before the last deal's (step ", earlier->step, ")");
      return std::nullopt;
    }
    if (!log.Find(first).has_value() && !o.redeal.has_value()) {
      // (Read forward from the start, it might take hours.)
      *why_not = absl::StrCat(log.path(), " has no position at or before batch ", first);
      return std::nullopt;
    }
    PSTRAIN_ASSIGN_OR_RETURN(std::unique_ptr<StreamedBatches> batches,
                             StreamedBatches::Start(env, o, {}, first, &log));
    const InputPosition p = batches->stream().position();
    if (batches->ended() || (o.num_epochs > 0 && p.epoch >= o.num_epochs)) {
      ended = true;  // its input had ended
      continue;
    }
    Left l;
    l.epoch = p.epoch;
    const std::vector<FilePiece> epoch = EpochPieces(o, p.epoch);
    for (const InputPosition::Open& f : p.open) {
      l.now.push_back({epoch[static_cast<size_t>(f.file)].file, f.offset, f.record});
    }
    for (size_t f = static_cast<size_t>(p.next_file); f < epoch.size(); ++f) {
      l.now.push_back(epoch[f]);
    }
    deal.read_again += p.taken;
    left[static_cast<size_t>(j)] = std::move(l);
  }
  // The pieces complete the furthest replica's epoch, or, when one had
  // read every epoch, the last: the replicas behind read their shares of
  // the epochs between.
  deal.epoch = 0;
  for (const std::optional<Left>& l : left) {
    if (l.has_value()) deal.epoch = std::max(deal.epoch, l->epoch);
  }
  if (ended && options.num_epochs > 0) deal.epoch = options.num_epochs - 1;
  for (int j = 0; j < m; ++j) {
    const std::optional<Left>& l = left[static_cast<size_t>(j)];
    if (!l.has_value()) continue;
    deal.pieces.insert(deal.pieces.end(), l->now.begin(), l->now.end());
    for (int64_t e = l->epoch + 1; e <= deal.epoch; ++e) {
      const std::vector<FilePiece> whole = EpochPieces(old[static_cast<size_t>(j)], e);
      deal.pieces.insert(deal.pieces.end(), whole.begin(), whole.end());
    }
  }
  return deal;
}

namespace {

// Removes the position logs of replicas r >= `replicas` (another replica
// may be removing them too).
absl::Status RemoveLogsBeyond(Env* env, const std::string& dir, int replicas) {
  PSTRAIN_ASSIGN_OR_RETURN(std::vector<std::string> names, env->ListDir(dir));
  for (const std::string& name : names) {
    int replica = 0;
    if (!name.starts_with("replica-") || !name.ends_with(".txt") ||
        !absl::SimpleAtoi(name.substr(8, name.size() - 12), &replica) || replica < replicas) {
      continue;
    }
    absl::Status s = env->DeleteFile(JoinPath(dir, name));
    if (!s.ok() && !absl::IsNotFound(s)) return s;
  }
  return absl::OkStatus();
}

}  // namespace

absl::Status SaveDeal(Env* env, const std::string& dir, const InputDeal& deal) {
  PSTRAIN_RETURN_IF_ERROR(env->WriteFileAtomic(DealPath(dir), deal.ToString()));
  return RemoveLogsBeyond(env, dir, deal.replicas);
}

absl::Status ForgetDeal(Env* env, const std::string& dir, int replicas) {
  if (env->FileExists(DealPath(dir))) {
    absl::Status s = env->DeleteFile(DealPath(dir));
    if (!s.ok() && !absl::IsNotFound(s)) return s;
  }
  return RemoveLogsBeyond(env, dir, replicas);
}

}  // namespace pstrain
