// The _braid extension module: braid's communicator, Bucketer, codecs and comm-hook engine for
// Python. Tensors never cross this boundary as torch objects: callers pass data pointers, element
// counts and braid dtypes (braid/_tensors.py turns torch tensors, numpy arrays and DLPack
// producers into those), so the module builds without torch headers and links no libtorch.
#include <pybind11/pybind11.h>
#include <pybind11/stl.h>

#include <chrono>
#include <condition_variable>
#include <cstdio>
#include <mutex>
#include <string>

#include "braid/types.h"
#include "python/src/common.h"

namespace braid::python {
namespace {

// Exception classes by code, set once by braid/__init__.py (braid.errors). Leaked on purpose:
// they must outlive every module-level object, and the interpreter owns them at exit anyway.
py::dict* gErrorClasses = nullptr;
py::object* gErrorBase = nullptr;

void setErrorClasses(py::object base, py::dict byCode) {
  if (gErrorClasses == nullptr) {
    gErrorClasses = new py::dict();
    gErrorBase = new py::object();
  }
  *gErrorClasses = std::move(byCode);
  *gErrorBase = std::move(base);
}

// The gate of GilSection: sections in progress (counted once per thread, at the outermost one)
// and whether new ones are refused.
std::mutex gGateMu;
std::condition_variable gGateCv;
bool gGateClosed = false;
int gGateActive = 0;
thread_local int tGateDepth = 0;

}  // namespace

GilSection::GilSection() {
  if (tGateDepth == 0) {
    std::lock_guard<std::mutex> lock(gGateMu);
    if (gGateClosed) return;
    ++gGateActive;
  }
  ++tGateDepth;
  entered_ = true;
  gil_.emplace();
}

GilSection::~GilSection() {
  if (!entered_) return;
  gil_.reset();
  if (--tGateDepth == 0) {
    std::lock_guard<std::mutex> lock(gGateMu);
    if (--gGateActive == 0) gGateCv.notify_all();
  }
}

void closePythonGate() {
  // This thread's own section, if it is in one, is not waited for.
  const int mine = tGateDepth > 0 ? 1 : 0;
  {
    std::lock_guard<std::mutex> lock(gGateMu);
    gGateClosed = true;
    if (gGateActive == mine) return;
  }
  py::gil_scoped_release release;  // the sections in progress may need the GIL to end
  std::unique_lock<std::mutex> lock(gGateMu);
  // Bounded like every wait: a section ends within a store call's or a teardown's own deadline,
  // but one stuck in a foreign store without a timeout must not hold the exit forever.
  constexpr int kExitWaitS = 60;
  if (!gGateCv.wait_for(lock, std::chrono::seconds(kExitWaitS),
                        [mine] { return gGateActive == mine; })) {
    std::fprintf(stderr,
                 "braid: %d thread(s) still inside a Python call %d s after exit began; "
                 "exiting without them\n",
                 gGateActive - mine, kExitWaitS);
  }
}

py::object makeException(const Status& s, int rank) {
  const int code = static_cast<int>(s.code());
  py::object cls;
  if (gErrorClasses != nullptr && gErrorClasses->contains(py::int_(code))) {
    cls = (*gErrorClasses)[py::int_(code)];
  } else if (gErrorBase != nullptr && !gErrorBase->is_none()) {
    cls = *gErrorBase;
  } else {
    cls = py::reinterpret_borrow<py::object>(PyExc_RuntimeError);
  }
  std::string text = s.message();
  const std::string prefix = "rank " + std::to_string(rank);
  // Name the rank once: messages from the communicator often start with it already.
  if (rank >= 0 && text.compare(0, prefix.size(), prefix) != 0) text = prefix + ": " + text;
  py::object exc = cls(text);
  try {
    exc.attr("code") = code;
    exc.attr("code_name") = codeName(s.code());
    exc.attr("rank") = rank;
  } catch (const py::error_already_set&) {
    // A class that refuses attributes still carries the message.
  }
  return exc;
}

void raiseStatus(const Status& s, int rank) {
  py::object exc = makeException(s, rank);
  PyErr_SetObject(reinterpret_cast<PyObject*>(Py_TYPE(exc.ptr())), exc.ptr());
  throw py::error_already_set();
}

CommHolder::~CommHolder() {
  if (comm_ == nullptr) return;
  if (PyGILState_Check()) {
    py::gil_scoped_release release;
    comm_.reset();
  } else {
    comm_.reset();
  }
}

Communicator& CommHolder::get() const {
  if (comm_ == nullptr) {
    raiseStatus(invalidUsage("the communicator was closed; create a new one"), rank_cache_);
  }
  return *comm_;
}

void CommHolder::close() {
  if (comm_ == nullptr) return;
  py::gil_scoped_release release;
  comm_.reset();
}

}  // namespace braid::python

PYBIND11_MODULE(_braid, m) {
  namespace py = pybind11;
  using namespace braid;
  m.doc() = "braid's C++ core (communicator, Bucketer, codecs); use the braid package instead";

  // At exit, after braid._close_all (registered later by braid/__init__.py, which imports this
  // module first; atexit runs last-in first-out): no braid thread enters Python once the
  // interpreter finalizes.
  py::module_::import("atexit").attr("register")(py::cpp_function(&braid::python::closePythonGate));

  m.def("_set_error_classes", &braid::python::setErrorClasses, py::arg("base"), py::arg("by_code"));

  py::enum_<DataType>(m, "DataType")
      .value("int8", DataType::kInt8)
      .value("uint8", DataType::kUint8)
      .value("int32", DataType::kInt32)
      .value("uint32", DataType::kUint32)
      .value("int64", DataType::kInt64)
      .value("uint64", DataType::kUint64)
      .value("float16", DataType::kFloat16)
      .value("float32", DataType::kFloat32)
      .value("float64", DataType::kFloat64)
      .value("bfloat16", DataType::kBFloat16);
  py::enum_<ReduceOp>(m, "ReduceOp")
      .value("sum", ReduceOp::kSum)
      .value("prod", ReduceOp::kProd)
      .value("max", ReduceOp::kMax)
      .value("min", ReduceOp::kMin)
      .value("avg", ReduceOp::kAvg);
  m.def("dtype_size", [](DataType t) { return dataTypeSize(t); });
  m.def("code_name", [](int c) { return std::string(codeName(static_cast<Code>(c))); });
  m.def("_raise_for_test", [](int code, const std::string& msg, int rank) {
    braid::python::raiseStatus(Status(static_cast<Code>(code), msg), rank);
  });

  braid::python::bindCommunicator(m);
  braid::python::bindBucketer(m);
  braid::python::bindHookEngine(m);
  braid::python::bindGroupEngine(m);
}
