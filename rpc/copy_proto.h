#ifndef PSTRAIN_RPC_COPY_PROTO_H_
#define PSTRAIN_RPC_COPY_PROTO_H_

// A rejoin's copies (issue 55) as InstallCopyRequests and back: a chunk's
// ParameterShard::BackupCopy, and a piece of a task's rows
// (SparseShard::BackupCopy, cut by RowsCopyPieces). Every field both ways;
// copy_proto_test.cc checks the round trip and refuses bytes that do not
// fit.

#include "absl/status/status.h"
#include "proto/parameter_server.pb.h"
#include "ps/parameter_shard.h"
#include "ps/sparse_shard.h"

namespace pstrain {

void ToProto(const ParameterShard::BackupCopy& copy, InstallCopyRequest* r);
// InvalidArgument for bytes that are no whole number of values.
absl::Status FromProto(const InstallCopyRequest& r, ParameterShard::BackupCopy* copy);

void ToProto(const SparseShard::BackupCopy& piece, InstallCopyRequest* r);
// InvalidArgument for a table whose bytes do not match its ids.
absl::Status FromProto(const InstallCopyRequest& r, SparseShard::BackupCopy* piece);

}  // namespace pstrain

#endif  // PSTRAIN_RPC_COPY_PROTO_H_
