// The comm-hook engine behind braid.torch.ddp_hook, and the codec bindings.
//
// DDP calls its comm hook on the autograd thread once per bucket, in bucket order, and expects
// a future. The hook hands the bucket to this engine and returns an uncompleted
// torch.futures.Future; one engine thread per hook state issues every collective (a plain
// all-reduce, or the codec's 1-3 collectives) in submission order, then takes the GIL only to
// complete the future (set_result with the bucket tensor, reduced in place, or set_exception
// with the BraidError naming the rank; through GilSection, so never once the interpreter exits).
// So the communicator sees a single issuing thread, and the autograd thread never waits for
// communication.
//
// Metrics: per bucket, submit/start/done times; a step ends with the bucket DDP marks last.
// Exposed communication is estimated as done(last) - submit(last): the last bucket is handed
// over when backward has produced every gradient, so what follows is communication not hidden
// behind compute (plus the wait for earlier buckets).
#include <pybind11/pybind11.h>
#include <pybind11/stl.h>

#include <condition_variable>
#include <deque>
#include <memory>
#include <mutex>
#include <string>
#include <thread>
#include <utility>
#include <vector>

#include "braid/comm.hpp"
#include "core/clock.h"
#include "python/src/common.h"
#ifdef BRAID_PY_WITH_CODECS
#include "compression/codec.h"
#endif

namespace braid::python {
namespace {

double msSince(uint64_t t0, uint64_t t) {
  return t <= t0 ? 0.0 : static_cast<double>(t - t0) / 1e6;
}

struct HookStep {
  uint64_t step = 0;
  int buckets = 0;
  uint64_t bytes = 0;      // dense bytes of the buckets
  uint64_t wireBytes = 0;  // what this rank handed to collectives (codec), else = bytes
  double commMs = 0;       // sum of start → done
  double exposedMs = 0;    // done(last) − submit(last)
  double spanMs = 0;       // submit(first) → done(last)
};

class HookEngine {
 public:
  HookEngine(std::shared_ptr<CommHolder> comm, const std::string& codecSpec, bool average)
      : comm_(std::move(comm)), average_(average) {
    comm_->get();  // raises when closed
    if (!codecSpec.empty() && codecSpec != "none") {
#ifdef BRAID_PY_WITH_CODECS
      std::string name;
      CodecOptions o;
      o.average = average;
      check(parseCodecSpec(codecSpec, &name, &o), comm_->rank());
      Result<std::unique_ptr<Codec>> c = createCodec(name, o);
      if (!c.isOk()) raiseStatus(c.status(), comm_->rank());
      codec_ = std::move(c.value());
      codecName_ = name;
#else
      raiseStatus(invalidArgument("codec '" + codecSpec +
                                  "' requested but this braid was built without compression/"),
                  comm_->rank());
#endif
    }
    thread_ = std::thread([this] { loop(); });
  }

  /// As GroupEngine's: destroyed on its own thread (the last reference went away in a
  /// future's callbacks), the thread is detached and its loop returns without touching this
  /// object again.
  ~HookEngine() {
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

  void submit(py::object future, py::object tensor, uintptr_t data, size_t count, DataType type,
              uint64_t bucketId, std::vector<std::pair<size_t, size_t>> shapes, bool last) {
    Job j;
    j.future = std::move(future);
    j.tensor = std::move(tensor);
    j.data = reinterpret_cast<void*>(data);
    j.count = count;
    j.type = type;
    j.bucketId = bucketId;
    j.last = last;
    for (const auto& [r, c] : shapes) j.shapes.push_back({r, c});
    j.submitNs = nowNs();
    {
      std::lock_guard<std::mutex> lock(mu_);
      if (stopping_) {
        raiseStatus(invalidUsage("the braid comm hook was closed"), comm_->rank());
      }
      jobs_.push_back(std::move(j));
    }
    cv_.notify_one();
  }

  /// Blocks until every submitted bucket is reduced (the futures are completed).
  void drain() {
    py::gil_scoped_release release;
    std::unique_lock<std::mutex> lock(mu_);
    idleCv_.wait(lock, [this] { return jobs_.empty() && !busy_; });
  }

  py::dict lastStep() {
    HookStep s;
    {
      std::lock_guard<std::mutex> lock(mu_);
      s = last_;
    }
    py::dict d;
    d["step"] = s.step;
    d["buckets"] = s.buckets;
    d["bytes"] = s.bytes;
    d["wire_bytes"] = s.wireBytes;
    d["comm_ms"] = s.commMs;
    d["exposed_ms"] = s.exposedMs;
    d["span_ms"] = s.spanMs;
    d["eta"] = s.commMs > 0 ? std::max(0.0, 1.0 - s.exposedMs / s.commMs) : 1.0;
    d["codec"] = codecName_.empty() ? std::string("none") : codecName_;
    return d;
  }

  /// Stops the engine and joins its thread; on the engine thread itself it only stops it.
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
    py::object future, tensor;
    void* data = nullptr;
    size_t count = 0;
    DataType type = DataType::kFloat32;
    uint64_t bucketId = 0;
#ifdef BRAID_PY_WITH_CODECS
    std::vector<TensorShape> shapes;
#else
    struct Shape {
      size_t rows, cols;
    };
    std::vector<Shape> shapes;
#endif
    bool last = false;
    uint64_t submitNs = 0;
  };

  bool onEngineThread() {
    std::lock_guard<std::mutex> lock(mu_);
    return thread_.joinable() && thread_.get_id() == std::this_thread::get_id();
  }

  void loop() {
    bool destroyed = false;  // set by the destructor when a completion destroyed this engine
    const int rank = comm_->rank();
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
        busy_ = true;
        stopping = stopping_;
      }
      const uint64_t start = nowNs();
      Status s;
      uint64_t wire = j.count * dataTypeSize(j.type);
      if (stopping) {
        s = invalidUsage("the braid comm hook was closed before bucket " +
                         std::to_string(j.bucketId) + " was reduced");
      } else if (comm_->closed()) {
        s = invalidUsage("the communicator of the braid comm hook was closed");
      } else {
        Communicator& c = *comm_->raw();
#ifdef BRAID_PY_WITH_CODECS
        if (codec_ && j.type == DataType::kFloat32) {
          if (stepBuckets_ == 0) codec_->setStep(stepIndex_);
          const uint64_t before = codec_->stats().wireBytes;
          s = codec_->allReduce(c, j.bucketId, static_cast<float*>(j.data), j.count, j.shapes);
          wire = codec_->stats().wireBytes - before;
        } else
#endif
        {
          s = c.allReduce(j.data, j.data, j.count, j.type,
                          average_ ? ReduceOp::kAvg : ReduceOp::kSum);
        }
      }
      const uint64_t done = nowNs();
      account(j, start, done, wire);
      complete(j, s, rank);
      if (destroyed) return;
      {
        std::lock_guard<std::mutex> lock(mu_);
        busy_ = false;
      }
      idleCv_.notify_all();
    }
  }

  /// Completes the future, then releases the job's Python objects (either may drop the last
  /// reference to this engine). Once the interpreter exits they are leaked (GilSection).
  static void complete(Job& j, const Status& s, int rank) {
    GilSection py;
    if (!py.entered()) {
      (void)j.future.release();
      (void)j.tensor.release();
      return;
    }
    try {
      if (s.isOk()) {
        j.future.attr("set_result")(j.tensor);
      } else {
        j.future.attr("set_exception")(makeException(s, rank));
      }
    } catch (py::error_already_set& e) {
      e.discard_as_unraisable("braid comm hook: completing a future");
    }
    j.future = py::object();
    j.tensor = py::object();
  }

  void account(const Job& j, uint64_t start, uint64_t done, uint64_t wire) {
    if (stepBuckets_ == 0) stepFirstSubmit_ = j.submitNs;
    ++stepBuckets_;
    cur_.bytes += j.count * dataTypeSize(j.type);
    cur_.wireBytes += wire;
    cur_.commMs += msSince(start, done);
    if (j.last) {
      cur_.step = stepIndex_;
      cur_.buckets = stepBuckets_;
      cur_.exposedMs = msSince(j.submitNs, done);
      cur_.spanMs = msSince(stepFirstSubmit_, done);
      {
        std::lock_guard<std::mutex> lock(mu_);
        last_ = cur_;
      }
      cur_ = HookStep();
      stepBuckets_ = 0;
      ++stepIndex_;
    }
  }

  std::shared_ptr<CommHolder> comm_;
  bool average_;
#ifdef BRAID_PY_WITH_CODECS
  std::unique_ptr<Codec> codec_;
#endif
  std::string codecName_;
  std::mutex mu_;
  std::condition_variable cv_, idleCv_;
  std::deque<Job> jobs_;
  bool stopping_ = false;
  bool busy_ = false;
  // Engine thread only.
  uint64_t stepIndex_ = 0;
  int stepBuckets_ = 0;
  uint64_t stepFirstSubmit_ = 0;
  HookStep cur_;
  // Guarded by mu_.
  HookStep last_;
  bool* destroyed_ = nullptr;  ///< in loop()'s frame; set by a destructor on the engine thread
  std::thread thread_;         // last: started after every other member exists
};

#ifdef BRAID_PY_WITH_CODECS
class PyCodec {
 public:
  PyCodec(const std::string& spec, bool average) {
    std::string name;
    CodecOptions o;
    o.average = average;
    check(parseCodecSpec(spec, &name, &o), -1);
    Result<std::unique_ptr<Codec>> c = createCodec(name, o);
    if (!c.isOk()) raiseStatus(c.status(), -1);
    codec_ = std::move(c.value());
  }
  Codec& get() { return *codec_; }

 private:
  std::unique_ptr<Codec> codec_;
};
#endif

}  // namespace

void bindHookEngine(py::module_& m) {
  py::class_<HookEngine, std::shared_ptr<HookEngine>>(m, "HookEngine")
      .def(py::init<std::shared_ptr<CommHolder>, const std::string&, bool>(), py::arg("comm"),
           py::arg("codec") = "", py::arg("average") = true)
      .def("submit", &HookEngine::submit, py::arg("future"), py::arg("tensor"), py::arg("data"),
           py::arg("count"), py::arg("dtype"), py::arg("bucket_id"), py::arg("shapes"),
           py::arg("last"))
      .def("drain", &HookEngine::drain)
      .def("last_step", &HookEngine::lastStep)
      .def("close", &HookEngine::close);

#ifdef BRAID_PY_WITH_CODECS
  m.attr("HAVE_CODECS") = true;
  m.attr("CODECS") =
      std::vector<std::string>{"none", "fp16", "bf16", "powersgd", "topk", "int8", "sign"};
  py::class_<PyCodec>(m, "Codec")
      .def(py::init<const std::string&, bool>(), py::arg("spec"), py::arg("average") = true)
      .def_property_readonly("name", [](PyCodec& c) { return std::string(c.get().info().name); })
      .def_property_readonly("error_feedback",
                             [](PyCodec& c) { return c.get().info().errorFeedback; })
      .def_property_readonly("wire_collective",
                             [](PyCodec& c) {
                               return c.get().info().collective == WireCollective::kAllReduce
                                          ? "all_reduce"
                                          : "all_gather";
                             })
      .def("set_step", [](PyCodec& c, uint64_t s) { c.get().setStep(s); })
      .def(
          "all_reduce",
          [](PyCodec& c, std::shared_ptr<CommHolder> comm, uint64_t bucket, uintptr_t data,
             size_t count, std::vector<std::pair<size_t, size_t>> shapes) {
            std::vector<TensorShape> sh;
            for (const auto& [r, k] : shapes) sh.push_back({r, k});
            Communicator& cm = comm->get();
            Status s;
            {
              py::gil_scoped_release release;
              s = c.get().allReduce(cm, bucket, reinterpret_cast<float*>(data), count, sh);
            }
            check(s, comm->rank());
          },
          py::arg("comm"), py::arg("bucket_id"), py::arg("data"), py::arg("count"),
          py::arg("shapes") = std::vector<std::pair<size_t, size_t>>{})
      .def("stats", [](PyCodec& c) {
        const CodecStats& s = c.get().stats();
        py::dict d;
        d["wire_bytes"] = s.wireBytes;
        d["dense_bytes"] = s.denseBytes;
        d["collectives"] = s.collectives;
        d["buckets"] = s.buckets;
        d["uncompressed"] = s.uncompressed;
        return d;
      });
#else
  m.attr("HAVE_CODECS") = false;
  m.attr("CODECS") = std::vector<std::string>{};
#endif
}

}  // namespace braid::python
