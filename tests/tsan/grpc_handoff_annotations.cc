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
//
// One more hand-off is a counter: a server call's OnDone (and the call's
// destruction) waits until every reaction of the call has dropped its
// reference (ServerCallbackCall::callbacks_outstanding_, an acq_rel
// fetch_sub). The header code's decrements are instrumented, but the one in
// libgrpc++'s OnCancel closure is not, so when that one is last, TSan saw no
// order between a tag's callback (its func_ read on a gRPC thread) and the
// call's destruction on the executor (CI stop 60: ps_client_test, a pull
// past its deadline; here 1 run in 100 under load). ScheduleOnDone, which
// the last decrement calls, whatever module it is in, acquires the counter:
//   ServerCallbackCall::ScheduleOnDone(inline)         acquires the counter
#include <dlfcn.h>
#include <grpc/grpc.h>
#include <grpcpp/support/server_callback.h>
#include <sanitizer/tsan_interface.h>

#include <atomic>
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

// The counter is private; an explicit instantiation may name it.
using CounterMember = std::atomic_int grpc::internal::ServerCallbackCall::*;
CounterMember CallbacksOutstanding();
template <CounterMember kMember>
struct ExposeCounter {
  friend CounterMember CallbacksOutstanding() { return kMember; }
};
template struct ExposeCounter<&grpc::internal::ServerCallbackCall::callbacks_outstanding_>;

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

void grpc::internal::ServerCallbackCall::ScheduleOnDone(bool inline_ondone) {
  using Fn = void (*)(ServerCallbackCall*, bool);
  static auto real = Real<Fn>("_ZN4grpc8internal18ServerCallbackCall14ScheduleOnDoneEb");
  __tsan_acquire(&(this->*CallbacksOutstanding()));
  real(this, inline_ondone);
}
