// ThreadSanitizer annotations for the system's (uninstrumented) gRPC core.
//
// gRPC's C++ API is header code, compiled into our instrumented binaries: a
// call's ops (the CallOpSet, its CallOp*s, the ByteBuffer a message is
// serialized into, the completion tag and its std::function) are written by
// the thread that starts a batch and read by the thread that completes it.
// gRPC core hands the batch from one to the other with atomics and lock-free
// queues in a library Debian builds without TSan, so TSan does not see that
// hand-off and reports the ops' own fields, a different field from run to
// run.
//
// Linked into the TSan build's test binaries only, this file defines the
// ends of that hand-off itself (the executable's definitions take precedence
// over the shared library's, for our calls, for the header code's and for the
// libraries' own calls through their PLT), tells TSan what they do, and calls
// the library's definition (dlsym(RTLD_NEXT)):
//   grpc_call_start_batch(call, ops, n, tag, ...)     releases `tag`
//   grpc_completion_queue_next / _pluck -> tag        acquires it
//   grpc_cq_end_op(cq, tag, ...)                      acquires it
// so everything a thread wrote before starting a batch happens before the
// batch's completion is run, as gRPC guarantees. The callback API's tags
// reach the threads that run them through a completion queue that
// libgrpc++'s own threads drain with grpc_completion_queue_next; where core
// runs a callback from grpc_cq_end_op instead, its executor hands it over
// under locks absl_sync_annotations.cc already makes visible. No report is
// suppressed: a race in our code, even one run from a gRPC callback, is still
// reported unless gRPC itself orders it. (A tag's address is reused by later
// batches, and TSan keeps what was released on it, so two unrelated threads
// that each start a batch on one tag are ordered too: a race between them
// could be missed, never a false one reported.)
#include <dlfcn.h>
#include <grpc/grpc.h>
#include <sanitizer/tsan_interface.h>

#include <cstdio>
#include <cstdlib>
#include <utility>

#include "absl/status/status.h"

// Internal to gRPC core, opaque here.
struct grpc_cq_completion;

namespace {

template <typename Fn>
Fn Real(const char* name) {
  void* fn = dlsym(RTLD_NEXT, name);
  if (fn == nullptr) {
    std::fprintf(stderr, "grpc_handoff_annotations: %s not found: %s\n", name, dlerror());
    std::abort();
  }
  return reinterpret_cast<Fn>(fn);
}

grpc_event Acquired(grpc_event event) {
  if (event.type == GRPC_OP_COMPLETE && event.tag != nullptr) __tsan_acquire(event.tag);
  return event;
}

}  // namespace

grpc_call_error grpc_call_start_batch(grpc_call* call, const grpc_op* ops, size_t nops, void* tag,
                                      void* reserved) {
  static auto real = Real<grpc_call_error (*)(grpc_call*, const grpc_op*, size_t, void*, void*)>(
      "grpc_call_start_batch");
  if (tag != nullptr) __tsan_release(tag);
  return real(call, ops, nops, tag, reserved);
}

grpc_event grpc_completion_queue_next(grpc_completion_queue* cq, gpr_timespec deadline,
                                      void* reserved) {
  static auto real = Real<grpc_event (*)(grpc_completion_queue*, gpr_timespec, void*)>(
      "grpc_completion_queue_next");
  return Acquired(real(cq, deadline, reserved));
}

grpc_event grpc_completion_queue_pluck(grpc_completion_queue* cq, void* tag, gpr_timespec deadline,
                                       void* reserved) {
  static auto real = Real<grpc_event (*)(grpc_completion_queue*, void*, gpr_timespec, void*)>(
      "grpc_completion_queue_pluck");
  return Acquired(real(cq, tag, deadline, reserved));
}

// src/core/lib/surface/completion_queue.h (gRPC 1.51: grpc_error_handle is
// absl::Status); C++ linkage, so this name is the library's mangled one.
void grpc_cq_end_op(grpc_completion_queue* cq, void* tag, absl::Status error,
                    void (*done)(void* done_arg, grpc_cq_completion* storage), void* done_arg,
                    grpc_cq_completion* storage, bool internal) {
  using Fn = void (*)(grpc_completion_queue*, void*, absl::Status,
                      void (*)(void*, grpc_cq_completion*), void*, grpc_cq_completion*, bool);
  static auto real = Real<Fn>(
      "_Z14grpc_cq_end_opP21grpc_completion_queuePvN4absl7debian36StatusEPFvS1_P18grpc_cq_"
      "completionES1_S6_b");
  if (tag != nullptr) __tsan_acquire(tag);
  real(cq, tag, std::move(error), done, done_arg, storage, internal);
}
