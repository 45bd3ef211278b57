// Bounded helpers shared by the transport tests: post until the transport takes the request,
// and test it until it completes, each failing at a deadline instead of hanging.
#pragma once

#include "core/clock.h"
#include "transport/transport.h"

namespace braid::transport::test_util {

/// Tests a request until it completes, fails, or the deadline passes.
inline Status waitRequest(Transport* t, Request* r, size_t* size, const Deadline& deadline) {
  Backoff backoff;
  for (;;) {
    bool done = false;
    Status s = t->test(r, &done, size);
    if (!s.isOk() || done) return s;
    if (deadline.expired()) return timeoutError("request did not complete before the deadline");
    backoff.pause();
  }
}

/// Posts a send, retrying while the transport answers "not yet" (null request).
inline Status postSend(Transport* t, SendComm* c, const void* data, size_t n, const Meta& meta,
                       Request** r, const Deadline& deadline) {
  Backoff backoff;
  for (;;) {
    Status s = t->isend(c, data, n, meta, r);
    if (!s.isOk() || *r != nullptr) return s;
    if (deadline.expired()) return timeoutError("isend kept returning a null request");
    backoff.pause();
  }
}

/// Posts a receive, retrying while the transport answers "not yet" (null request).
inline Status postRecv(Transport* t, RecvComm* c, void* data, size_t n, Meta* meta, Request** r,
                       const Deadline& deadline) {
  Backoff backoff;
  for (;;) {
    Status s = t->irecv(c, data, n, meta, r);
    if (!s.isOk() || *r != nullptr) return s;
    if (deadline.expired()) return timeoutError("irecv kept returning a null request");
    backoff.pause();
  }
}

}  // namespace braid::transport::test_util
