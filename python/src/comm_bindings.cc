// Communicator, Work and Python-store bindings. Buffers are (address, element count, DataType);
// braid/_tensors.py derives them from tensors and keeps the tensors alive around async work.
#include <pybind11/pybind11.h>
#include <pybind11/stl.h>
#include <unistd.h>

#include <algorithm>
#include <memory>
#include <string>
#include <vector>

#include "braid/comm.hpp"
#include "core/clock.h"
#include "braid/store.h"
#include "python/src/common.h"

namespace braid::python {
namespace {

void* ptr(uintptr_t p) { return reinterpret_cast<void*>(p); }

/// A braid Store over any Python object with set(key, bytes), get(key) -> bytes, add(key, int)
/// -> int and, for bounded waits, a way to look without blocking: check([key]) -> bool, or
/// compare_set(key, expected, desired), which returns `expected` for a missing key without
/// creating it (torch 1.13's PrefixStore, the store torch hands a process group, has no
/// check(); its get() of a missing key blocks for the store's whole timeout). torch.distributed's
/// stores (TCPStore, FileStore, HashStore, PrefixStore) fit as they are. Called from braid's
/// threads; each call takes the GIL for its duration only, through a GilSection: once the
/// interpreter exits, calls fail and the object is leaked instead of released.
class PyStore final : public Store {
 public:
  explicit PyStore(py::object store) : store_(std::move(store)) {
    hasCheck_ = py::hasattr(store_, "check");
    hasCompareSet_ = !hasCheck_ && py::hasattr(store_, "compare_set");
  }
  ~PyStore() override {
    GilSection py;
    if (py.entered()) {
      store_ = py::object();
    } else {
      (void)store_.release();  // the interpreter is exiting: never touched without the GIL
    }
  }

  Status set(const std::string& key, const std::vector<uint8_t>& value) override {
    GilSection py;
    if (!py.entered()) return exiting("set", key);
    try {
      store_.attr("set")(key, py::bytes(reinterpret_cast<const char*>(value.data()), value.size()));
      return Status::ok();
    } catch (py::error_already_set& e) {
      return systemError("Python store set('" + key + "') failed: " + e.what());
    }
  }

  Result<std::vector<uint8_t>> get(const std::string& key, Deadline deadline) override {
    useconds_t pause = 200;
    for (;;) {
      {
        GilSection py;
        if (!py.entered()) return exiting("get", key);
        try {
          bool present = true;  // with neither, get() itself blocks (its own timeout)
          if (hasCheck_) {
            py::list keys;
            keys.append(key);
            present = store_.attr("check")(keys).cast<bool>();
          } else if (hasCompareSet_) {
            // A value never written by braid: returned as is only for a missing key.
            static const std::string kAbsent = "\x01braid:absent\x01";
            py::bytes absent(kAbsent);
            std::string v = store_.attr("compare_set")(key, absent, absent).cast<std::string>();
            if (v != kAbsent) return std::vector<uint8_t>(v.begin(), v.end());
            present = false;
          }
          if (present) {
            std::string v = store_.attr("get")(key).cast<std::string>();
            return std::vector<uint8_t>(v.begin(), v.end());
          }
        } catch (py::error_already_set& e) {
          return systemError("Python store get('" + key + "') failed: " + e.what());
        }
      }
      if (deadline.expired()) {
        return timeoutError("key '" + key + "' did not appear in the Python store in time");
      }
      usleep(pause);
      pause = std::min<useconds_t>(pause * 2, 10000);
    }
  }

  Result<int64_t> add(const std::string& key, int64_t delta) override {
    GilSection py;
    if (!py.entered()) return exiting("add", key);
    try {
      return store_.attr("add")(key, delta).cast<int64_t>();
    } catch (py::error_already_set& e) {
      return systemError("Python store add('" + key + "') failed: " + e.what());
    }
  }

 private:
  static Status exiting(const char* op, const std::string& key) {
    return invalidUsage(std::string("Python store ") + op + "('" + key +
                        "') not called: the Python interpreter is exiting");
  }

  py::object store_;
  bool hasCheck_ = false;
  bool hasCompareSet_ = false;
};

class PyWork {
 public:
  PyWork(std::shared_ptr<Work> w, int rank) : work_(std::move(w)), rank_(rank) {}
  bool test() { return work_->test(); }
  /// timeoutMs <= 0: bounded by the communicator's timeout inside the operation.
  void wait(int64_t timeoutMs) {
    Status s;
    {
      py::gil_scoped_release release;
      s = work_->wait(timeoutMs);
    }
    check(s, rank_);
  }

 private:
  std::shared_ptr<Work> work_;
  int rank_;
};

std::shared_ptr<CommHolder> fromEnv() {
  Result<std::unique_ptr<Communicator>> c = invalidArgument("");
  {
    py::gil_scoped_release release;
    c = Communicator::createFromEnvironment();
  }
  if (!c.isOk()) {
    const char* r = std::getenv("RANK");
    raiseStatus(c.status(), r != nullptr ? std::atoi(r) : -1);
  }
  return std::make_shared<CommHolder>(std::move(c.value()));
}

std::shared_ptr<CommHolder> fromStore(py::object store, int rank, int size,
                                      const std::string& transport, int64_t timeoutMs,
                                      const std::string& keyPrefix) {
  auto s = std::make_shared<PyStore>(std::move(store));
  Result<std::unique_ptr<Communicator>> c = invalidArgument("");
  {
    py::gil_scoped_release release;
    CommOptions o;  // no job secret: create() exchanges one through the store
    o.rank = rank;
    o.size = size;
    o.store = s;
    o.transport = transport;
    o.timeoutMs = timeoutMs;  // 0: BRAID_TIMEOUT_MS
    o.keyPrefix = keyPrefix;  // "": braid/c<N>/ (N counts this process's communicators)
    c = Communicator::create(std::move(o));
    if (!c.isOk()) c = c.status().withContext("rendezvous through the Python store");
  }
  if (!c.isOk()) raiseStatus(c.status(), rank);
  return std::make_shared<CommHolder>(std::move(c.value()));
}

template <typename F>
void blocking(const CommHolder& h, F&& f) {
  Communicator& c = h.get();
  Status s;
  {
    py::gil_scoped_release release;
    s = f(c);
  }
  check(s, h.rank());
}

template <typename F>
PyWork async(const CommHolder& h, F&& f) {
  Communicator& c = h.get();
  Result<std::shared_ptr<Work>> w = invalidArgument("");
  {
    py::gil_scoped_release release;
    w = f(c);
  }
  if (!w.isOk()) raiseStatus(w.status(), h.rank());
  return PyWork(std::move(w.value()), h.rank());
}

}  // namespace

void bindCommunicator(py::module_& m) {
  py::class_<PyWork>(m, "Work")
      .def("test", &PyWork::test, "True when finished; never blocks")
      .def("wait", &PyWork::wait, py::arg("timeout_ms") = 0,
           "Waits; raises the BraidError of a failed operation. timeout_ms > 0: raises "
           "BraidTimeoutError when not done by then, and fails the communicator");

  using H = CommHolder;
  py::class_<H, std::shared_ptr<H>>(m, "Comm")
      .def_static("from_env", &fromEnv,
                  "Bootstraps from torchrun variables, mpiexec or BRAID_FILE_STORE")
      .def_static("from_store", &fromStore, py::arg("store"), py::arg("rank"), py::arg("size"),
                  py::arg("transport") = "", py::arg("timeout_ms") = 0, py::arg("key_prefix") = "",
                  "Rendezvous through a Python key-value store (e.g. torch.distributed's); "
                  "timeout_ms bounds every wait (0: BRAID_TIMEOUT_MS); key_prefix: where the "
                  "communicator's keys live (\"\": braid/c<N>/, N counting this process's "
                  "communicators)")
      .def_property_readonly("timeout_ms", [](const H& h) { return h.get().timeoutMs(); })
      .def("algorithms",
           [](const H& h, int collective) {
             return h.get().algorithms(static_cast<Collective>(collective));
           })
      .def("algorithm_for",
           [](const H& h, int collective, size_t bytes) {
             return h.get().algorithmFor(static_cast<Collective>(collective), bytes);
           })
      .def("selector_model", [](const H& h) { return h.get().selectorModel(); })
      .def_property_readonly("rank", [](const H& h) { return h.get().rank(); })
      .def_property_readonly("size", [](const H& h) { return h.get().size(); })
      .def_property_readonly("local_rank", [](const H& h) { return h.get().localRank(); })
      .def_property_readonly("local_size", [](const H& h) { return h.get().localSize(); })
      .def_property_readonly("host_index", [](const H& h) { return h.get().hostIndex(); })
      .def_property_readonly("num_hosts", [](const H& h) { return h.get().numHosts(); })
      .def_property_readonly("closed", &H::closed)
      .def("all_reduce",
           [](const H& h, uintptr_t s, uintptr_t r, size_t n, DataType t, ReduceOp op) {
             blocking(h, [&](Communicator& c) { return c.allReduce(ptr(s), ptr(r), n, t, op); });
           })
      .def("reduce_scatter",
           [](const H& h, uintptr_t s, uintptr_t r, size_t n, DataType t, ReduceOp op) {
             blocking(h,
                      [&](Communicator& c) { return c.reduceScatter(ptr(s), ptr(r), n, t, op); });
           })
      .def("all_gather",
           [](const H& h, uintptr_t s, uintptr_t r, size_t n, DataType t) {
             blocking(h, [&](Communicator& c) { return c.allGather(ptr(s), ptr(r), n, t); });
           })
      .def("broadcast",
           [](const H& h, uintptr_t s, uintptr_t r, size_t n, DataType t, int root) {
             blocking(h, [&](Communicator& c) { return c.broadcast(ptr(s), ptr(r), n, t, root); });
           })
      .def("reduce",
           [](const H& h, uintptr_t s, uintptr_t r, size_t n, DataType t, ReduceOp op, int root) {
             blocking(h, [&](Communicator& c) { return c.reduce(ptr(s), ptr(r), n, t, op, root); });
           })
      .def("all_to_all",
           [](const H& h, uintptr_t s, uintptr_t r, size_t n, DataType t) {
             blocking(h, [&](Communicator& c) { return c.allToAll(ptr(s), ptr(r), n, t); });
           })
      .def("barrier", [](const H& h) { blocking(h, [](Communicator& c) { return c.barrier(); }); })
      .def("send",
           [](const H& h, uintptr_t b, size_t n, DataType t, int peer) {
             blocking(h, [&](Communicator& c) { return c.send(ptr(b), n, t, peer); });
           })
      .def("recv",
           [](const H& h, uintptr_t b, size_t n, DataType t, int peer) {
             blocking(h, [&](Communicator& c) { return c.recv(ptr(b), n, t, peer); });
           })
      .def("all_reduce_async",
           [](const H& h, uintptr_t s, uintptr_t r, size_t n, DataType t, ReduceOp op) {
             return async(
                 h, [&](Communicator& c) { return c.allReduceAsync(ptr(s), ptr(r), n, t, op); });
           })
      .def("reduce_scatter_async",
           [](const H& h, uintptr_t s, uintptr_t r, size_t n, DataType t, ReduceOp op) {
             return async(h, [&](Communicator& c) {
               return c.reduceScatterAsync(ptr(s), ptr(r), n, t, op);
             });
           })
      .def("all_gather_async",
           [](const H& h, uintptr_t s, uintptr_t r, size_t n, DataType t) {
             return async(h,
                          [&](Communicator& c) { return c.allGatherAsync(ptr(s), ptr(r), n, t); });
           })
      .def("broadcast_async",
           [](const H& h, uintptr_t s, uintptr_t r, size_t n, DataType t, int root) {
             return async(
                 h, [&](Communicator& c) { return c.broadcastAsync(ptr(s), ptr(r), n, t, root); });
           })
      .def("allreduce_algorithm_for",
           [](const H& h, size_t bytes) {
             return h.get().algorithmFor(Collective::kAllReduce, bytes);
           })
      .def("set_allreduce_algorithm",
           [](const H& h, const std::string& name) {
             check(h.get().setAlgorithm(Collective::kAllReduce, name), h.rank());
           })
      .def(
          "abort",
          [](const H& h, const std::string& reason) {
            Communicator& c = h.get();
            py::gil_scoped_release release;
            c.abort(reason);
          },
          py::arg("reason") = "aborted by the application")
      .def(
          "shrink",
          [](const H& h, const std::vector<int>& excluded, bool abort) -> std::shared_ptr<H> {
            Communicator& c = h.get();
            Result<std::unique_ptr<Communicator>> r = invalidArgument("");
            {
              py::gil_scoped_release release;
              r = c.shrink(excluded, abort ? ShrinkMode::kAbort : ShrinkMode::kDefault);
            }
            if (!r.isOk()) raiseStatus(r.status(), h.rank());
            if (r.value() == nullptr) return nullptr;
            return std::make_shared<H>(std::move(r.value()));
          },
          py::arg("excluded"), py::arg("abort") = false,
          "A communicator of the ranks not in excluded (None on an excluded rank); see "
          "Communicator::shrink")
      .def(
          "subgroup",
          [](const H& h, const std::vector<int>& ranks, int64_t timeoutMs) -> std::shared_ptr<H> {
            Communicator& c = h.get();
            Result<std::unique_ptr<Communicator>> r = invalidArgument("");
            {
              py::gil_scoped_release release;
              r = c.subgroup(ranks, timeoutMs);
            }
            if (!r.isOk()) raiseStatus(r.status(), h.rank());
            return std::make_shared<H>(std::move(r.value()));
          },
          py::arg("ranks"), py::arg("timeout_ms") = 0,
          "A communicator of the listed ranks, created by them alone; see "
          "Communicator::subgroup")
      .def("check_health", [](const H& h) { check(h.get().health(), h.rank()); })
      .def("close", &H::close);
}

}  // namespace braid::python
