#include "rpc/row_client.h"

#include <cstring>
#include <utility>

#include "absl/strings/str_cat.h"
#include "common/status_macros.h"
#include "proto/parameter_server.grpc.pb.h"
#include "ps_protocol/row_wire.h"

namespace pstrain {

RowClient::RowClient(const PsConnections* connections, std::vector<TableLayout> tables, int replica)
    : connections_(connections), tables_(std::move(tables)), replica_(replica) {}

RowClient::Placement RowClient::Place(const SparseStep& step) const {
  const int num_ps = connections_->size();
  Placement p;
  p.owner.resize(step.tables.size());
  p.position.resize(step.tables.size());
  std::vector<int32_t> counts(num_ps);
  for (size_t t = 0; t < step.tables.size(); ++t) {
    const std::vector<int64_t>& ids = step.tables[t].ids;
    p.owner[t].resize(ids.size());
    p.position[t].resize(ids.size());
    std::fill(counts.begin(), counts.end(), 0);
    for (size_t k = 0; k < ids.size(); ++k) {
      const int ps = RowOwner(tables_[t].key, ids[k], num_ps);
      p.owner[t][k] = ps;
      p.position[t][k] = counts[ps]++;
    }
  }
  return p;
}

absl::Status RowClient::Pull(SparseStep* step, int64_t global_step, int64_t generation) {
  return PullAs(replica_, step, global_step, generation);
}

absl::Status RowClient::ReadRows(SparseStep* step) { return PullAs(-1, step, 0, 0); }

absl::Status RowClient::PullAs(int replica, SparseStep* step, int64_t global_step,
                               int64_t generation) {
  const int num_ps = connections_->size();
  const Placement placement = Place(*step);
  std::vector<PullRowsRequest> requests(num_ps);
  // Per ps: its parts' tables, and each part's ids.
  std::vector<std::vector<std::vector<int64_t>>> ids(
      num_ps, std::vector<std::vector<int64_t>>(tables_.size()));
  for (size_t t = 0; t < step->tables.size(); ++t) {
    for (size_t k = 0; k < step->tables[t].ids.size(); ++k) {
      ids[placement.owner[t][k]][t].push_back(step->tables[t].ids[k]);
    }
  }
  std::vector<int> asked;  // the ps that own any id
  int64_t sent = 0;
  for (int p = 0; p < num_ps; ++p) {
    requests[p].set_replica(replica);
    requests[p].set_step(global_step);
    requests[p].set_generation(generation);
    if (connections_->copies() > 1) requests[p].set_owner(p);
    for (size_t t = 0; t < tables_.size(); ++t) {
      if (ids[p][t].empty()) continue;
      TableRows* part = requests[p].add_tables();
      part->set_table(static_cast<int>(t));
      EncodeIds(ids[p][t], part->mutable_ids());
      sent += static_cast<int64_t>(part->ids().size());
    }
    if (requests[p].tables_size() > 0) asked.push_back(p);
  }
  std::vector<PullRowsResponse> responses(num_ps);
  PSTRAIN_RETURN_IF_ERROR(connections_->Broadcast(
      static_cast<int>(asked.size()), "PullRows",
      [&](int i) { return connections_->TaskName(connections_->Serving(asked[i])); },
      [&](int i, grpc::ClientContext* ctx, std::function<void(grpc::Status)> done) {
        const int p = asked[i];
        connections_->stub(connections_->Serving(p))
            ->async()
            ->PullRows(ctx, &requests[p], &responses[p], std::move(done));
      },
      std::nullopt, [&](int i) { return asked[i]; }));
  // Each ps's rows, per table, in the order its ids were sent.
  std::vector<std::vector<std::vector<float>>> rows(
      num_ps, std::vector<std::vector<float>>(tables_.size()));
  int64_t received = 0;
  for (int p : asked) {
    const PullRowsResponse& response = responses[p];
    if (response.tables_size() != requests[p].tables_size()) {
      return absl::DataLossError(absl::StrCat(connections_->TaskName(p), " answered ",
                                              response.tables_size(), " tables of rows for ",
                                              requests[p].tables_size()));
    }
    for (int i = 0; i < response.tables_size(); ++i) {
      const TableRows& part = response.tables(i);
      const int t = part.table();
      if (t != requests[p].tables(i).table()) {
        return absl::DataLossError(absl::StrCat(connections_->TaskName(p),
                                                " answered rows of table ", t, " for table ",
                                                requests[p].tables(i).table()));
      }
      PSTRAIN_RETURN_IF_ERROR(DecodeFloats(part.values(), ids[p][t].size() * tables_[t].dim,
                                           tables_[t].name.c_str(), &rows[p][t]));
      received += static_cast<int64_t>(part.values().size());
    }
  }
  int64_t pulled = 0;
  for (size_t t = 0; t < step->tables.size(); ++t) {
    TableStep& table = step->tables[t];
    const int64_t dim = tables_[t].dim;
    table.rows.resize(table.ids.size() * dim);
    for (size_t k = 0; k < table.ids.size(); ++k) {
      const float* from =
          rows[placement.owner[t][k]][t].data() + int64_t{placement.position[t][k]} * dim;
      std::memcpy(table.rows.data() + k * dim, from, dim * sizeof(float));
    }
    pulled += static_cast<int64_t>(table.ids.size());
  }
  absl::MutexLock lock(&mu_);
  traffic_.bytes_sent += sent;
  traffic_.bytes_received += received;
  traffic_.rows_pulled += pulled;
  return absl::OkStatus();
}

absl::StatusOr<bool> RowClient::Push(const SparseStep& step, int64_t global_step,
                                     int64_t generation) {
  const int num_ps = connections_->size();
  const Placement placement = Place(step);
  std::vector<PushRowsRequest> requests(num_ps);
  int64_t sent = 0, pushed = 0;
  for (int p = 0; p < num_ps; ++p) {
    requests[p].set_replica(replica_);
    requests[p].set_step(global_step);
    requests[p].set_generation(generation);
    if (connections_->copies() > 1) requests[p].set_owner(p);
  }
  std::vector<int64_t> ids;
  std::vector<float> grads;
  for (size_t t = 0; t < step.tables.size(); ++t) {
    const TableStep& table = step.tables[t];
    const int64_t dim = tables_[t].dim;
    for (int p = 0; p < num_ps; ++p) {
      ids.clear();
      grads.clear();
      for (size_t k = 0; k < table.ids.size(); ++k) {
        if (placement.owner[t][k] != p) continue;
        ids.push_back(table.ids[k]);
        grads.insert(grads.end(), table.grads.begin() + k * dim,
                     table.grads.begin() + (k + 1) * dim);
      }
      if (ids.empty()) continue;
      TableRows* part = requests[p].add_tables();
      part->set_table(static_cast<int>(t));
      EncodeIds(ids, part->mutable_ids());
      EncodeFloats(grads, part->mutable_values());
      sent += static_cast<int64_t>(part->ids().size() + part->values().size());
    }
    pushed += static_cast<int64_t>(table.ids.size());
  }
  std::vector<PushRowsResponse> responses(num_ps);
  PSTRAIN_RETURN_IF_ERROR(connections_->Broadcast(
      num_ps, "PushRows", [&](int p) { return connections_->TaskName(connections_->Serving(p)); },
      [&](int p, grpc::ClientContext* ctx, std::function<void(grpc::Status)> done) {
        connections_->stub(connections_->Serving(p))
            ->async()
            ->PushRows(ctx, &requests[p], &responses[p], std::move(done));
      },
      std::nullopt, [](int p) { return p; }));
  bool stale = false;
  for (const PushRowsResponse& r : responses) stale = stale || r.stale();
  absl::MutexLock lock(&mu_);
  traffic_.bytes_sent += sent;
  traffic_.rows_pushed += pushed;
  return stale;
}

RowClient::Traffic RowClient::traffic() const {
  absl::MutexLock lock(&mu_);
  return traffic_;
}

}  // namespace pstrain
