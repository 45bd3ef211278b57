// The engine behind braid.torch's process group (the torch.distributed backend "braid").
//
// torch.distributed hands a process group its operations on the caller's thread (the Python
// training loop, or DDP's reducer on the autograd thread) and expects a Work at once. Each braid
// process group owns one GroupEngine: a FIFO of jobs and one thread that runs them in issue
// order, so the communicator sees a single issuing thread and every rank runs the group's
// operations in the same order. A job is
//
//   steps   braid collectives (address, count, dtype, op, root/peer) run without the GIL, then
//   more    optionally a Python iterator: next(more) (with the GIL, on the engine thread)
//           returns the next list of steps (a step whose size depends on an earlier one, e.g.
//           an all-to-all padded to the largest block) or ends the job; the Python side also
//           copies results out of scratch buffers there,
//   done    done(None) or done(exception) with the GIL: completes the Work and its future.
//
// A failed step ends its job (the communicator is failed from then on, so later jobs fail
// quickly with the same error, which names the rank). close() fails the jobs not yet started.
// No Python exception escapes the engine thread (unraisable hook instead). The thread takes the
// GIL through GilSection only (common.h), so it never enters Python once the interpreter exits.
#include <pybind11/pybind11.h>
#include <pybind11/stl.h>

#include <condition_variable>
#include <deque>
#include <memory>
#include <mutex>
#include <string>
#include <thread>
#include <tuple>
#include <utility>
#include <vector>

#include "braid/comm.hpp"
#include "python/src/common.h"

namespace braid::python {
namespace {

/// One braid call. `a` and `b` are the send and receive addresses (send/recv: the buffer in a);
/// `root` is the root of broadcast/reduce and the peer of send/recv.
struct Step {
  Collective kind = Collective::kBarrier;
  uintptr_t a = 0, b = 0;
  size_t count = 0;
  DataType type = DataType::kUint8;
  ReduceOp op = ReduceOp::kSum;
  int root = 0;
};

using StepTuple = std::tuple<int, uintptr_t, uintptr_t, size_t, DataType, ReduceOp, int>;

std::vector<Step> toSteps(const std::vector<StepTuple>& in) {
  std::vector<Step> out;
  out.reserve(in.size());
  for (const auto& [kind, a, b, count, type, op, root] : in) {
    if (kind < static_cast<int>(Collective::kAllReduce) ||
        kind > static_cast<int>(Collective::kRecv)) {
      throw py::value_error("braid group engine: unknown step kind " + std::to_string(kind));
    }
    out.push_back({static_cast<Collective>(kind), a, b, count, type, op, root});
  }
  return out;
}

Status runStep(Communicator& c, const Step& s) {
  void* a = reinterpret_cast<void*>(s.a);
  void* b = reinterpret_cast<void*>(s.b);
  switch (s.kind) {
    case Collective::kAllReduce:
      return c.allReduce(a, b, s.count, s.type, s.op);
    case Collective::kReduceScatter:
      return c.reduceScatter(a, b, s.count, s.type, s.op);
    case Collective::kAllGather:
      return c.allGather(a, b, s.count, s.type);
    case Collective::kBroadcast:
      return c.broadcast(a, b, s.count, s.type, s.root);
    case Collective::kReduce:
      return c.reduce(a, b, s.count, s.type, s.op, s.root);
    case Collective::kAllToAll:
      return c.allToAll(a, b, s.count, s.type);
    case Collective::kBarrier:
      return c.barrier();
    case Collective::kSend:
      return c.send(a, s.count, s.type, s.root);
    case Collective::kRecv:
      return c.recv(a, s.count, s.type, s.root);
  }
  return internalError("braid group engine: unhandled step");
}

class GroupEngine {
 public:
  explicit GroupEngine(std::shared_ptr<CommHolder> comm) : comm_(std::move(comm)) {
    comm_->get();  // raises when closed
    rank_ = comm_->rank();
    thread_ = std::thread([this] { loop(); });
  }

  /// The last reference can go away on the engine thread itself, in a job's Python code (a
  /// completed Work held the process group): that thread cannot be joined from here, so it is
  /// detached and its loop returns without touching this object again. Whatever this engine
  /// owns (the communicator) is torn down right here, still inside that thread's GilSection.
  ~GroupEngine() {
    if (onEngineThread()) {
      {
        std::lock_guard<std::mutex> lock(mu_);
        stopping_ = true;
      }
      *destroyed_ = true;
      thread_.detach();
    } else {
      close();
    }
  }

  void submit(const std::vector<StepTuple>& steps, py::object more, py::object done) {
    Job j;
    j.steps = toSteps(steps);
    j.more = std::move(more);
    j.done = std::move(done);
    {
      std::lock_guard<std::mutex> lock(mu_);
      if (stopping_) {
        raiseStatus(invalidUsage("the braid process group was destroyed"), rank_);
      }
      jobs_.push_back(std::move(j));
      ++submitted_;
    }
    cv_.notify_one();
  }

  /// Jobs submitted and not yet completed.
  size_t pending() {
    std::lock_guard<std::mutex> lock(mu_);
    return submitted_ - completed_;
  }

  /// Stops taking jobs; the ones not started fail; waits for the running one (which is bounded
  /// by the communicator's timeout). Called on the engine thread (from a job's Python code), it
  /// only stops the engine: the thread is joined by a later close() or the destructor.
  void close() {
    std::thread t;
    {
      std::lock_guard<std::mutex> lock(mu_);
      stopping_ = true;
      if (!thread_.joinable() || thread_.get_id() == std::this_thread::get_id()) {
        cv_.notify_all();
        return;
      }
      t = std::move(thread_);  // one closer joins
    }
    cv_.notify_all();
    joinReleasingGil(t);
  }

 private:
  struct Job {
    std::vector<Step> steps;
    py::object more, done;
  };

  bool onEngineThread() {
    std::lock_guard<std::mutex> lock(mu_);
    return thread_.joinable() && thread_.get_id() == std::this_thread::get_id();
  }

  /// After any Python call, `destroyed` says whether that call destroyed this engine; when it
  /// did, the loop returns at once (rank and destroyed live on its own frame).
  void loop() {
    bool destroyed = false;
    const int rank = rank_;
    {
      std::lock_guard<std::mutex> lock(mu_);
      destroyed_ = &destroyed;
    }
    for (;;) {
      Job j;
      bool stopping = false;
      {
        std::unique_lock<std::mutex> lock(mu_);
        cv_.wait(lock, [this] { return stopping_ || !jobs_.empty(); });
        if (jobs_.empty()) return;  // stopping with nothing left
        j = std::move(jobs_.front());
        jobs_.pop_front();
        stopping = stopping_;
      }
      if (!stopping && p2pOnly(j)) {
        runP2pGroup(std::move(j), destroyed, rank);
        if (destroyed) return;
        continue;
      }
      Status s;
      if (stopping) {
        s = invalidUsage("the braid process group was destroyed before this operation ran");
      } else {
        s = run(j, destroyed);
      }
      complete(j, s, rank);
      if (destroyed) return;
      countCompleted();
    }
  }

  void countCompleted() {
    std::lock_guard<std::mutex> lock(mu_);
    ++completed_;
  }

  /// Whether the job has a Python iterator of further steps.
  static bool hasMore(const Job& j) { return !(j.more.is_none() || !j.more); }

  static bool p2pOnly(const Job& j) {
    for (const Step& s : j.steps) {
      if (s.kind != Collective::kSend && s.kind != Collective::kRecv) return false;
    }
    return !j.steps.empty();
  }

  static void appendOps(const Job& j, std::vector<P2pOp>* ops) {
    for (const Step& s : j.steps) {
      ops->push_back(
          {s.kind == Collective::kSend, reinterpret_cast<void*>(s.a), s.count, s.type, s.root});
    }
  }

  /// A job of sends and receives (isend/irecv, batch_isend_irecv, gather, scatter) runs as one
  /// point-to-point group, and the p2p jobs queued behind it while it waits join the group:
  /// two ranks that isend to each other before they irecv then exchange at once instead of
  /// waiting on each other's send until the timeout. Each job completes as soon as its own
  /// operations have, except the first when it has more to run (that runs after the group).
  /// Messages to one peer keep issue order; a collective queued behind waits for the group.
  /// Completed jobs keep their Python objects until the group ends: releasing them could drop
  /// the last reference to this engine in the middle of the communicator's call.
  void runP2pGroup(Job first, const bool& destroyed, const int rank) {
    std::vector<Job> members;
    std::vector<size_t> owner;  // per operation: its job in members
    std::vector<size_t> left;   // per job: operations not yet completed
    std::vector<P2pOp> ops;
    auto add = [&](Job j, std::vector<P2pOp>* to) {
      const size_t before = to->size();
      appendOps(j, to);
      owner.resize(before + j.steps.size(), members.size());
      left.push_back(j.steps.size());
      members.push_back(std::move(j));
    };
    add(std::move(first), &ops);
    const bool firstHasMore = hasMore(members[0]);
    // Completed during the group (the first job, when it has more, only after it).
    auto finished = [&](size_t m) { return left[m] == 0 && !(m == 0 && firstHasMore); };
    P2pGroupHooks hooks;
    hooks.join = [&](std::vector<P2pOp>* more) {
      std::lock_guard<std::mutex> lock(mu_);
      while (!stopping_ && !jobs_.empty() && p2pOnly(jobs_.front()) && !hasMore(jobs_.front())) {
        add(std::move(jobs_.front()), more);
        jobs_.pop_front();
      }
    };
    hooks.completed = [&](size_t i) {
      const size_t m = owner[i];
      --left[m];
      if (!finished(m)) return;
      complete(members[m], Status::ok(), rank, /*release=*/false);
      countCompleted();
    };
    Status s;
    if (comm_->closed()) {
      s = invalidUsage("the communicator of the process group was closed");
    } else {
      s = comm_->raw()->sendRecvGroup(std::move(ops), hooks);
    }
    if (s.isOk() && firstHasMore) {
      members[0].steps.clear();
      s = run(members[0], destroyed);
    }
    // Once a release destroyed this engine only the local jobs are touched (static calls).
    for (size_t m = 0; m < members.size(); ++m) {
      if (finished(m)) {
        release(members[m]);
        continue;
      }
      complete(members[m], s, rank);
      if (!destroyed) countCompleted();
    }
  }

  /// done(None) or done(exception), then the job's Python objects are released (either may
  /// drop the last reference to this engine). Once the interpreter exits they are leaked.
  static void complete(Job& j, const Status& s, int rank, bool release = true) {
    GilSection py;
    if (!py.entered()) {
      leak(j);
      return;
    }
    try {
      if (s.isOk()) {
        j.done(py::none());
      } else {
        j.done(makeException(s, rank));
      }
    } catch (py::error_already_set& e) {
      e.discard_as_unraisable("braid process group: completing an operation");
    }
    if (release) dropObjects(j);
  }

  static void dropObjects(Job& j) {
    j.more = py::object();
    j.done = py::object();
  }

  static void leak(Job& j) {
    (void)j.done.release();
    (void)j.more.release();
  }

  /// Drops a completed job's Python objects (see complete).
  static void release(Job& j) {
    GilSection py;
    if (!py.entered()) {
      leak(j);
      return;
    }
    dropObjects(j);
  }

  Status run(Job& j, const bool& destroyed) {
    std::vector<Step> steps = std::move(j.steps);
    for (;;) {
      if (comm_->closed()) return invalidUsage("the communicator of the process group was closed");
      Communicator& c = *comm_->raw();
      for (const Step& s : steps) BRAID_RETURN_IF_ERROR(runStep(c, s));
      if (!hasMore(j)) return Status::ok();
      GilSection py;
      if (!py.entered()) {
        return invalidUsage("braid process group: the Python interpreter is exiting");
      }
      try {
        py::handle next = PyIter_Next(j.more.ptr());
        if (destroyed) {
          if (next.ptr() != nullptr) next.dec_ref();
          PyErr_Clear();
          return invalidUsage("the braid process group was destroyed during this operation");
        }
        if (next.ptr() == nullptr) {
          if (PyErr_Occurred()) throw py::error_already_set();
          return Status::ok();  // the iterator is exhausted: the job is complete
        }
        py::object list = py::reinterpret_steal<py::object>(next);
        steps = toSteps(list.cast<std::vector<StepTuple>>());
      } catch (py::error_already_set& e) {
        return internalError(std::string("braid process group: ") + e.what());
      } catch (const std::exception& e) {
        return internalError(std::string("braid process group: ") + e.what());
      }
    }
  }

  std::shared_ptr<CommHolder> comm_;
  int rank_ = -1;
  std::mutex mu_;
  std::condition_variable cv_;
  std::deque<Job> jobs_;
  bool stopping_ = false;
  size_t submitted_ = 0, completed_ = 0;
  bool* destroyed_ = nullptr;  ///< in loop()'s frame; set by a destructor on the engine thread
  std::thread thread_;         // last: started after every other member exists
};

}  // namespace

void bindGroupEngine(py::module_& m) {
  py::class_<GroupEngine, std::shared_ptr<GroupEngine>>(m, "GroupEngine")
      .def(py::init<std::shared_ptr<CommHolder>>(), py::arg("comm"))
      .def("submit", &GroupEngine::submit, py::arg("steps"), py::arg("more"), py::arg("done"),
           "Queues a job: steps [(kind, a, b, count, dtype, op, root)], an iterator giving more "
           "step lists (or None), and done(exception or None)")
      .def("pending", &GroupEngine::pending)
      .def("close", &GroupEngine::close);
}

}  // namespace braid::python
