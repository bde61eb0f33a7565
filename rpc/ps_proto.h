#ifndef PSTRAIN_RPC_PS_PROTO_H_
#define PSTRAIN_RPC_PS_PROTO_H_

// The ps's answers as protos and as plain structs (ps_status.h), both
// directions in one place: the service writes them (ToProto), the gRPC
// clients read them (FromProto). A field added to one side is added here,
// and ps_proto_test.cc checks that every proto field is carried both ways.

#include "proto/parameter_server.pb.h"
#include "ps_protocol/ps_status.h"

namespace pstrain {

void ToProto(const PsStatus& s, StatusResponse* r);
PsStatus FromProto(const StatusResponse& r);

void ToProto(const ShardSaved& s, SaveResponse* r);
ShardSaved FromProto(const SaveResponse& r);

}  // namespace pstrain

#endif  // PSTRAIN_RPC_PS_PROTO_H_
