// Shared pieces of the _braid extension: turning a braid Status into the matching Python
// exception (braid.BraidError subclasses, registered by braid/__init__.py), and the holder that
// owns a Communicator on the Python side.
//
// GIL rule of the whole module: every call that can block (collectives, waits, finishStep,
// communicator creation and destruction) runs with the GIL released; only the conversion of
// its outcome to Python objects holds it.
#pragma once

#include <pybind11/pybind11.h>

#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <thread>

#include "braid/comm.hpp"
#include "braid/status.h"

namespace braid::python {

namespace py = pybind11;

/// Raises the BraidError subclass for s.code() with "rank R: <message>" (R < 0: no rank known);
/// the exception carries .code (int), .code_name and .rank. Needs the GIL.
[[noreturn]] void raiseStatus(const Status& s, int rank);
/// The exception object raiseStatus would raise (for completing futures with an error).
py::object makeException(const Status& s, int rank);

/// The GIL for a braid thread (an engine's, the communicator's worker, one tearing a communicator
/// down through a Python store), unless the interpreter is exiting. Python 3.11 ends a thread
/// that asks for the GIL once finalization has begun (pthread_exit), and that unwinding through
/// a braid destructor calls std::terminate. So every braid thread takes the GIL through a
/// GilSection, and at exit (an atexit hook the module registers when it loads, so that it runs
/// after braid._close_all) closePythonGate() refuses new sections and waits, without the GIL, for
/// the running ones to end: a communicator torn down on an engine thread finishes its teardown
/// before the interpreter finalizes. A refused section leaves Python alone (entered() is false):
/// the caller reports an error, or leaks the Python objects it holds. Nested sections on one
/// thread are always entered.
class GilSection {
 public:
  GilSection();
  ~GilSection();
  GilSection(const GilSection&) = delete;
  GilSection& operator=(const GilSection&) = delete;
  bool entered() const { return entered_; }

 private:
  bool entered_ = false;
  std::optional<py::gil_scoped_acquire> gil_;
};

/// Closes the gate of GilSection and waits for the sections in progress. Called with the GIL.
void closePythonGate();

/// Joins an engine's thread, releasing the GIL first when this thread holds it (the loop may need
/// it to finish its last completion).
inline void joinReleasingGil(std::thread& thread) {
  if (PyGILState_Check()) {
    py::gil_scoped_release release;
    thread.join();
  } else {
    thread.join();
  }
}

inline void check(const Status& s, int rank) {
  if (!s.isOk()) raiseStatus(s, rank);
}

/// A Communicator owned by Python. Destruction releases the GIL (rank 0 waits, bounded, for
/// its peers to leave; peers may need the GIL of this process to read a Python store).
class CommHolder {
 public:
  explicit CommHolder(std::unique_ptr<Communicator> comm) : comm_(std::move(comm)) {}
  ~CommHolder();

  /// The communicator, or a raised BraidError (invalid usage) after close().
  Communicator& get() const;
  Communicator* raw() const { return comm_.get(); }
  int rank() const { return rank_cache_; }
  bool closed() const { return comm_ == nullptr; }
  void close();

 private:
  std::unique_ptr<Communicator> comm_;
  int rank_cache_ = comm_ ? comm_->rank() : -1;
};

/// Registers the Communicator/Work/Store bindings (comm_bindings.cc).
void bindCommunicator(py::module_& m);
/// Registers the Bucketer and StepMetrics bindings (bucketer_bindings.cc).
void bindBucketer(py::module_& m);
/// Registers the process-group engine of braid.torch's backend (group_engine.cc).
void bindGroupEngine(py::module_& m);
/// Registers the comm-hook engine and the codec bindings (hook_engine.cc).
void bindHookEngine(py::module_& m);

}  // namespace braid::python
