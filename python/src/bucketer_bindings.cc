// Bucketer and step-metrics bindings. The Bucketer keeps its communicator alive (it holds the
// CommHolder), and is destroyed with the GIL released (its engine thread is joined).
#include <pybind11/pybind11.h>
#include <pybind11/stl.h>

#include <memory>
#include <string>
#include <type_traits>
#include <utility>
#include <vector>

#include "braid/bucketer.hpp"
#include "python/src/common.h"

namespace braid::python {
namespace {

// The Bucketer's codec options arrived with the compression integration; these detect them so
// that the bindings build against a Bucketer with or without codecs.
template <typename T, typename = void>
struct HasCodec : std::false_type {};
template <typename T>
struct HasCodec<
    T, std::void_t<decltype(std::declval<T&>().codec), decltype(std::declval<T&>().codecMinBytes),
                   decltype(std::declval<T&>().smallBucketCodec)>> : std::true_type {};
template <typename T, typename = void>
struct HasWireBytes : std::false_type {};
template <typename T>
struct HasWireBytes<T, std::void_t<decltype(std::declval<T&>().wireBytes)>> : std::true_type {};
template <typename B, typename = void>
struct HasShapedRegister : std::false_type {};
template <typename B>
struct HasShapedRegister<
    B, std::void_t<decltype(std::declval<B&>().registerParam(
           uint32_t{}, std::declval<const std::vector<size_t>&>(), DataType{}, std::string()))>>
    : std::true_type {};

template <typename O>
void setCodec(O& o, const std::string& codec, size_t minBytes, const std::string& small, int rank) {
  if constexpr (HasCodec<O>::value) {
    o.codec = codec;
    o.codecMinBytes = minBytes;
    o.smallBucketCodec = small;
  } else if (!codec.empty() && codec != "none") {
    raiseStatus(invalidArgument("codec '" + codec + "': this braid's Bucketer takes no codec"),
                rank);
  }
}

template <typename M>
uint64_t wireBytesOf(const M& m) {
  if constexpr (HasWireBytes<M>::value) {
    return m.wireBytes;
  } else {
    return m.bytes;
  }
}

template <typename B>
Status registerShaped(B& b, uint32_t id, const std::vector<size_t>& shape, DataType t,
                      const std::string& name) {
  if constexpr (HasShapedRegister<B>::value) {
    return b.registerParam(id, shape, t, name);
  } else {
    size_t n = 1;
    for (size_t d : shape) n *= d;
    return b.registerParam(id, n, t, name);
  }
}

class PyBucketer {
 public:
  PyBucketer(std::shared_ptr<CommHolder> comm, std::unique_ptr<Bucketer> b)
      : comm_(std::move(comm)), b_(std::move(b)) {}
  ~PyBucketer() { reset(); }

  Bucketer& get() {
    if (b_ == nullptr) raiseStatus(invalidUsage("the Bucketer was closed"), rank());
    return *b_;
  }
  int rank() const { return comm_->rank(); }
  void reset() {
    if (b_ == nullptr) return;
    if (PyGILState_Check()) {
      py::gil_scoped_release release;
      b_.reset();
    } else {
      b_.reset();
    }
  }
  template <typename F>
  auto released(F&& f) {
    Bucketer& b = get();
    py::gil_scoped_release release;
    return f(b);
  }

 private:
  std::shared_ptr<CommHolder> comm_;  // declared first: outlives the Bucketer
  std::unique_ptr<Bucketer> b_;
};

std::unique_ptr<PyBucketer> create(std::shared_ptr<CommHolder> comm, int sizing,
                                   size_t bucketCapBytes, size_t firstBucketCapBytes, bool average,
                                   bool zeroCopy, bool findUnused, bool rebuildLayout,
                                   int maxInFlight, const std::string& metricsFile,
                                   const std::string& codec, size_t codecMinBytes,
                                   const std::string& smallBucketCodec) {
  BucketerOptions o;
  o.sizing = static_cast<BucketSizing>(sizing);
  o.bucketCapBytes = bucketCapBytes;
  o.firstBucketCapBytes = firstBucketCapBytes;
  o.reduction = average ? GradReduction::kAverage : GradReduction::kSum;
  o.zeroCopy = zeroCopy;
  o.findUnused = findUnused;
  o.rebuildLayout = rebuildLayout;
  o.maxInFlight = maxInFlight;
  o.metricsFile = metricsFile;
  setCodec(o, codec, codecMinBytes, smallBucketCodec, comm->rank());
  Communicator& c = comm->get();
  Result<std::unique_ptr<Bucketer>> b = Bucketer::create(&c, o);
  if (!b.isOk()) raiseStatus(b.status(), comm->rank());
  return std::make_unique<PyBucketer>(std::move(comm), std::move(b.value()));
}

}  // namespace

void bindBucketer(py::module_& m) {
  m.attr("HAVE_BUCKETER_CODECS") = HasCodec<BucketerOptions>::value;
  py::class_<BucketMetrics>(m, "BucketMetrics")
      .def_readonly("bytes", &BucketMetrics::bytes)
      .def_property_readonly("wire_bytes", [](const BucketMetrics& b) { return wireBytesOf(b); })
      .def_readonly("params", &BucketMetrics::params)
      .def_readonly("ready_ms", &BucketMetrics::readyMs)
      .def_readonly("start_ms", &BucketMetrics::startMs)
      .def_readonly("done_ms", &BucketMetrics::doneMs)
      .def_readonly("skew_ms", &BucketMetrics::skewMs)
      .def_readonly("slowest_rank", &BucketMetrics::slowestRank);

  py::class_<StepMetrics>(m, "StepMetrics")
      .def_readonly("step", &StepMetrics::step)
      .def_readonly("communicated", &StepMetrics::communicated)
      .def_readonly("rebuilt", &StepMetrics::rebuilt)
      .def_readonly("step_ms", &StepMetrics::stepMs)
      .def_readonly("compute_ms", &StepMetrics::computeMs)
      .def_readonly("comm_ms", &StepMetrics::commMs)
      .def_readonly("exposed_ms", &StepMetrics::exposedMs)
      .def_readonly("eta", &StepMetrics::eta)
      .def_readonly("overlap", &StepMetrics::overlap)
      .def_readonly("bytes", &StepMetrics::bytes)
      .def_property_readonly("wire_bytes", [](const StepMetrics& m) { return wireBytesOf(m); })
      .def_readonly("max_skew_ms", &StepMetrics::maxSkewMs)
      .def_readonly("slowest_rank", &StepMetrics::slowestRank)
      .def_property_readonly("skew_clock",
                             [](const StepMetrics& s) { return std::string(s.skewClock); })
      .def_readonly("tail_by_caller", &StepMetrics::tailByCaller)
      .def_readonly("buckets", &StepMetrics::buckets)
      .def("json", [](const StepMetrics& s, int rank) { return stepMetricsJson(s, rank); })
      .def("prometheus",
           [](const StepMetrics& s, int rank) { return stepMetricsPrometheus(s, rank); });

  using B = PyBucketer;
  py::class_<B>(m, "Bucketer")
      .def(py::init(&create), py::arg("comm"), py::arg("sizing") = 0,
           py::arg("bucket_cap_bytes") = 0, py::arg("first_bucket_cap_bytes") = 0,
           py::arg("average") = true, py::arg("zero_copy") = false, py::arg("find_unused") = false,
           py::arg("rebuild_layout") = true, py::arg("max_in_flight") = 2,
           py::arg("metrics_file") = "", py::arg("codec") = "", py::arg("codec_min_bytes") = 0,
           py::arg("small_bucket_codec") = "")
      .def(
          "register_param",
          [](B& b, uint32_t id, size_t count, DataType t, const std::string& name) {
            check(b.get().registerParam(id, count, t, name), b.rank());
          },
          py::arg("id"), py::arg("count"), py::arg("dtype"), py::arg("name") = "")
      .def(
          "register_param_shaped",
          [](B& b, uint32_t id, const std::vector<size_t>& shape, DataType t,
             const std::string& name) {
            check(registerShaped(b.get(), id, shape, t, name), b.rank());
          },
          py::arg("id"), py::arg("shape"), py::arg("dtype"), py::arg("name") = "")
      .def("finalize",
           [](B& b) { check(b.released([](Bucketer& x) { return x.finalize(); }), b.rank()); })
      .def("gradient_buffer",
           [](B& b, uint32_t id) {
             Result<void*> r = b.get().gradientBuffer(id);
             if (!r.isOk()) raiseStatus(r.status(), b.rank());
             return reinterpret_cast<uintptr_t>(r.value());
           })
      .def("result",
           [](B& b, uint32_t id) {
             Result<const void*> r = b.get().result(id);
             if (!r.isOk()) raiseStatus(r.status(), b.rank());
             return reinterpret_cast<uintptr_t>(r.value());
           })
      .def("zero_gradients", [](B& b) { b.get().zeroGradients(); })
      .def_property_readonly("layout_version", [](B& b) { return b.get().layoutVersion(); })
      .def(
          "begin_step",
          [](B& b, bool accumulate) { check(b.get().beginStep(accumulate), b.rank()); },
          py::arg("accumulate") = false)
      .def("mark_ready",
           [](B& b, uint32_t id, uintptr_t grad) {
             Status s = b.released(
                 [&](Bucketer& x) { return x.markReady(id, reinterpret_cast<void*>(grad)); });
             check(s, b.rank());
           })
      .def("mark_unused", [](B& b, uint32_t id) { check(b.get().markUnused(id), b.rank()); })
      .def("finish_step",
           [](B& b) {
             Result<StepMetrics> r = b.released([](Bucketer& x) { return x.finishStep(); });
             if (!r.isOk()) raiseStatus(r.status(), b.rank());
             return std::move(r.value());
           })
      .def("globally_unused", [](B& b, uint32_t id) { return b.get().globallyUnused(id); })
      .def("bucket_layout", [](B& b) { return b.get().bucketLayout(); })
      .def_property_readonly("bucket_count", [](B& b) { return b.get().bucketCount(); })
      .def("close", &B::reset);
}

}  // namespace braid::python
