#include "rpc/copy_proto.h"

#include <map>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "common/status_macros.h"
#include "ps_protocol/row_wire.h"

namespace pstrain {
namespace {

void ToProto(const BarrierProgress& p, CopiedProgress* r) {
  r->set_step(p.step);
  r->set_generation(p.generation);
  r->set_sequence(p.sequence);
  r->set_applied(p.applied);
  r->mutable_last_async_step()->Add(p.last_async_step.begin(), p.last_async_step.end());
  r->mutable_last_sync_step()->Add(p.last_sync_step.begin(), p.last_sync_step.end());
}

BarrierProgress FromProto(const CopiedProgress& r) {
  BarrierProgress p;
  p.step = r.step();
  p.generation = r.generation();
  p.sequence = r.sequence();
  p.applied = r.applied();
  p.last_async_step.assign(r.last_async_step().begin(), r.last_async_step().end());
  p.last_sync_step.assign(r.last_sync_step().begin(), r.last_sync_step().end());
  return p;
}

// `flat` cut into `n` equal pieces; InvalidArgument if it does not divide.
absl::Status Split(const std::vector<float>& flat, size_t n, const char* what,
                   std::vector<std::vector<float>>* out) {
  out->clear();
  if (n == 0) {
    if (!flat.empty()) {
      return absl::InvalidArgumentError(absl::StrCat(what, ": values for no row"));
    }
    return absl::OkStatus();
  }
  if (flat.size() % n != 0) {
    return absl::InvalidArgumentError(
        absl::StrCat(what, ": ", flat.size(), " values do not divide among ", n, " rows"));
  }
  const size_t each = flat.size() / n;
  for (size_t k = 0; k < n; ++k)
    out->emplace_back(flat.begin() + k * each, flat.begin() + (k + 1) * each);
  return absl::OkStatus();
}

}  // namespace

void ToProto(const ParameterShard::BackupCopy& copy, InstallCopyRequest* r) {
  ToProto(copy.progress, r->mutable_progress());
  r->set_step(copy.values.step);
  r->set_optimizer_step(copy.values.optimizer_step);
  EncodeFloats(copy.values.params, r->mutable_params());
  EncodeFloats(copy.values.state, r->mutable_state());
  for (const std::vector<float>& slot : copy.values.slots) EncodeFloats(slot, r->add_slots());
  EncodeFloats(copy.prev_params, r->mutable_prev_params());
  EncodeFloats(copy.prev_state, r->mutable_prev_state());
  r->set_prev_step(copy.prev_step);
}

absl::Status FromProto(const InstallCopyRequest& r, ParameterShard::BackupCopy* copy) {
  *copy = ParameterShard::BackupCopy();
  copy->progress = FromProto(r.progress());
  copy->values.step = r.step();
  copy->values.optimizer_step = r.optimizer_step();
  PSTRAIN_RETURN_IF_ERROR(DecodeAllFloats(r.params(), "params", &copy->values.params));
  PSTRAIN_RETURN_IF_ERROR(DecodeAllFloats(r.state(), "state", &copy->values.state));
  for (const std::string& slot : r.slots()) {
    copy->values.slots.emplace_back();
    PSTRAIN_RETURN_IF_ERROR(DecodeAllFloats(slot, "slots", &copy->values.slots.back()));
    if (copy->values.slots.back().size() != copy->values.params.size()) {
      return absl::InvalidArgumentError(absl::StrCat("a slot of ", copy->values.slots.back().size(),
                                                     " values for ", copy->values.params.size(),
                                                     " parameters"));
    }
  }
  PSTRAIN_RETURN_IF_ERROR(DecodeAllFloats(r.prev_params(), "prev_params", &copy->prev_params));
  PSTRAIN_RETURN_IF_ERROR(DecodeAllFloats(r.prev_state(), "prev_state", &copy->prev_state));
  copy->prev_step = r.prev_step();
  return absl::OkStatus();
}

void ToProto(const SparseShard::BackupCopy& piece, InstallCopyRequest* r) {
  ToProto(piece.progress, r->mutable_progress());
  // Rows grouped by table, in the piece's order within each.
  std::map<int, CopiedTableRows*> by_table;
  std::map<int, std::vector<int64_t>> ids;
  std::map<int, std::vector<float>> weights, slots;
  for (const SparseShard::BackupCopy::Row& row : piece.rows) {
    CopiedTableRows*& t = by_table[row.table];
    if (t == nullptr) {
      t = r->add_rows();
      t->set_table(row.table);
    }
    ids[row.table].push_back(row.id);
    weights[row.table].insert(weights[row.table].end(), row.weights.begin(), row.weights.end());
    slots[row.table].insert(slots[row.table].end(), row.slots.begin(), row.slots.end());
    t->add_last_steps(row.last_step);
    t->add_counts(row.count);
  }
  for (auto& [table, t] : by_table) {
    EncodeIds(ids[table], t->mutable_ids());
    EncodeFloats(weights[table], t->mutable_weights());
    EncodeFloats(slots[table], t->mutable_slots());
  }
  std::map<int, CopiedTableRows*> pending;
  std::map<int, std::vector<int64_t>> pending_ids;
  for (const SparseShard::BackupCopy::PendingId& p : piece.pending) {
    CopiedTableRows*& t = pending[p.table];
    if (t == nullptr) {
      t = r->add_pending();
      t->set_table(p.table);
    }
    pending_ids[p.table].push_back(p.id);
    t->add_last_steps(p.last_step);
    t->add_counts(p.count);
  }
  for (auto& [table, t] : pending) EncodeIds(pending_ids[table], t->mutable_ids());
  r->set_last_evict(piece.last_evict);
  r->set_undo_step(piece.undo_step);
  for (size_t t = 0; t < piece.undo_ids.size(); ++t) {
    CopiedTableRows* undo = r->add_undo();
    undo->set_table(static_cast<int>(t));
    EncodeIds(piece.undo_ids[t], undo->mutable_ids());
    EncodeFloats(piece.undo_weights[t], undo->mutable_weights());
  }
}

absl::Status FromProto(const InstallCopyRequest& r, SparseShard::BackupCopy* piece) {
  *piece = SparseShard::BackupCopy();
  piece->progress = FromProto(r.progress());
  for (const CopiedTableRows& t : r.rows()) {
    std::vector<int64_t> ids;
    std::vector<float> weights, slots;
    PSTRAIN_RETURN_IF_ERROR(DecodeIds(t.ids(), "rows ids", &ids));
    PSTRAIN_RETURN_IF_ERROR(DecodeAllFloats(t.weights(), "rows weights", &weights));
    PSTRAIN_RETURN_IF_ERROR(DecodeAllFloats(t.slots(), "rows slots", &slots));
    if (static_cast<size_t>(t.last_steps_size()) != ids.size() ||
        static_cast<size_t>(t.counts_size()) != ids.size()) {
      return absl::InvalidArgumentError(
          absl::StrCat("copied rows of table ", t.table(), ": ", ids.size(), " ids, ",
                       t.last_steps_size(), " last steps and ", t.counts_size(), " counts"));
    }
    std::vector<std::vector<float>> w, s;
    PSTRAIN_RETURN_IF_ERROR(Split(weights, ids.size(), "rows weights", &w));
    PSTRAIN_RETURN_IF_ERROR(Split(slots, ids.size(), "rows slots", &s));
    for (size_t k = 0; k < ids.size(); ++k) {
      piece->rows.push_back(
          {t.table(), ids[k], std::move(w[k]), std::move(s[k]), t.last_steps(k), t.counts(k)});
    }
  }
  for (const CopiedTableRows& t : r.pending()) {
    std::vector<int64_t> ids;
    PSTRAIN_RETURN_IF_ERROR(DecodeIds(t.ids(), "pending ids", &ids));
    if (static_cast<size_t>(t.last_steps_size()) != ids.size() ||
        static_cast<size_t>(t.counts_size()) != ids.size()) {
      return absl::InvalidArgumentError(
          absl::StrCat("copied pending ids of table ", t.table(), ": ", ids.size(), " ids, ",
                       t.last_steps_size(), " last steps and ", t.counts_size(), " counts"));
    }
    for (size_t k = 0; k < ids.size(); ++k) {
      piece->pending.push_back({t.table(), ids[k], t.counts(k), t.last_steps(k)});
    }
  }
  piece->last_evict = r.last_evict();
  piece->undo_step = r.undo_step();
  for (const CopiedTableRows& t : r.undo()) {
    if (t.table() != static_cast<int>(piece->undo_ids.size())) {
      return absl::InvalidArgumentError(
          absl::StrCat("the undo rows of table ", t.table(), " out of order"));
    }
    piece->undo_ids.emplace_back();
    piece->undo_weights.emplace_back();
    PSTRAIN_RETURN_IF_ERROR(DecodeIds(t.ids(), "undo ids", &piece->undo_ids.back()));
    PSTRAIN_RETURN_IF_ERROR(
        DecodeAllFloats(t.weights(), "undo weights", &piece->undo_weights.back()));
  }
  return absl::OkStatus();
}

}  // namespace pstrain
