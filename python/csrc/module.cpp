// ferry._C: the nanobind module under the PyTorch layer (python/ferry/*.py).
//
// No libtorch here: tensors cross as TensorView (pointer, dtype, shape, strides),
// streams as integers (torch's cuda_stream), and results come back as pointers the
// Python layer wraps with __cuda_array_interface__. This file: errors, enums,
// TensorView and the Communicator; ops.cpp binds AllReduce and EpBuffer.
#include <nanobind/nanobind.h>
#include <nanobind/stl/shared_ptr.h>
#include <nanobind/stl/string.h>
#include <nanobind/stl/vector.h>

#include <chrono>
#include <cstring>
#include <memory>

#include "bindings.hpp"
#include "ferry/bootstrap.hpp"
#include "ferry/communicator.hpp"
#include "ferry/error.hpp"
#include "ferry/ep.hpp"
#include "ferry/types.hpp"
#include "ferry/version.hpp"

namespace nb = nanobind;

namespace ferry::python {
namespace {

// Python exception types, created once at import. ferry.InvalidArgument is both a
// ferry.Error and a ValueError, ferry.TimeoutError both a ferry.Error and the
// builtin TimeoutError, so callers can catch either.
struct ExceptionTypes {
  PyObject* error = nullptr;
  PyObject* invalid_argument = nullptr;
  PyObject* timeout = nullptr;
  PyObject* aborted = nullptr;
  PyObject* mismatch = nullptr;
  PyObject* not_supported = nullptr;
  PyObject* bootstrap = nullptr;
  PyObject* cuda = nullptr;
};
ExceptionTypes g_exceptions;

// `bases`: one exception type, or a tuple of them (not stolen). The reference
// PyErr_NewExceptionWithDoc returns stays in g_exceptions for the translator.
PyObject* new_exception(nb::module_& m, const char* name, nb::handle bases, const char* doc) {
  std::string qualified = std::string("ferry.") + name;
  PyObject* type = PyErr_NewExceptionWithDoc(qualified.c_str(), doc, bases.ptr(), nullptr);
  if (type == nullptr) throw nb::python_error();
  m.attr(name) = nb::handle(type);
  return type;
}

nb::tuple bases2(PyObject* a, PyObject* b) { return nb::make_tuple(nb::handle(a), nb::handle(b)); }

void register_exceptions(nb::module_& m) {
  auto& t = g_exceptions;
  t.error = new_exception(m, "Error", nb::handle(PyExc_RuntimeError), "Base of every error ferry raises.");
  t.invalid_argument = new_exception(m, "InvalidArgument", bases2(t.error, PyExc_ValueError),
                                     "An argument the API cannot accept (bad tensor, size, option).");
  t.timeout = new_exception(m, "TimeoutError", bases2(t.error, PyExc_TimeoutError),
                            "A wait (device flag, socket) ran past its deadline; the communicator is aborted.");
  t.aborted = new_exception(m, "AbortedError", nb::handle(t.error), "The communicator failed earlier and refuses work.");
  t.mismatch = new_exception(m, "MismatchError", nb::handle(t.error), "Ranks disagree about a collective.");
  t.not_supported = new_exception(m, "NotSupported", nb::handle(t.error), "Not available with this build, group or hardware.");
  t.bootstrap = new_exception(m, "BootstrapError", nb::handle(t.error), "Processes could not find or talk to each other.");
  t.cuda = new_exception(m, "CudaError", nb::handle(t.error), "A CUDA runtime or driver call failed.");
  // One translator, most derived C++ types first.
  nb::register_exception_translator([](const std::exception_ptr& p, void*) {
    try {
      std::rethrow_exception(p);
    } catch (const InvalidArgument& e) {
      PyErr_SetString(g_exceptions.invalid_argument, e.what());
    } catch (const TimeoutError& e) {
      PyErr_SetString(g_exceptions.timeout, e.what());
    } catch (const AbortedError& e) {
      PyErr_SetString(g_exceptions.aborted, e.what());
    } catch (const MismatchError& e) {
      PyErr_SetString(g_exceptions.mismatch, e.what());
    } catch (const NotSupported& e) {
      PyErr_SetString(g_exceptions.not_supported, e.what());
    } catch (const BootstrapError& e) {
      PyErr_SetString(g_exceptions.bootstrap, e.what());
    } catch (const CudaError& e) {
      PyErr_SetString(g_exceptions.cuda, e.what());
    } catch (const Error& e) {
      PyErr_SetString(g_exceptions.error, e.what());
    }
  });
}

void bind_types(nb::module_& m) {
  nb::enum_<DataType>(m, "DataType")
      .value("float32", DataType::kFloat32)
      .value("float64", DataType::kFloat64)
      .value("int32", DataType::kInt32)
      .value("int64", DataType::kInt64)
      .value("bfloat16", DataType::kBFloat16)
      .value("float16", DataType::kFloat16)
      .value("float8_e4m3", DataType::kFloat8E4M3);
  nb::enum_<ReduceOp>(m, "ReduceOp")
      .value("sum", ReduceOp::kSum)
      .value("prod", ReduceOp::kProd)
      .value("min", ReduceOp::kMin)
      .value("max", ReduceOp::kMax)
      .value("avg", ReduceOp::kAvg);
  m.def("reduce_op_from_string", &reduce_op_from_string, nb::arg("name"));
  m.def("dtype_size", &dtype_size, nb::arg("dtype"));
  // The UCX built against and the one this process loaded (ferry/version.hpp).
  nb::class_<UcxVersions>(m, "UcxVersions")
      .def_ro("built_with_ucx", &UcxVersions::built_with_ucx)
      .def_ro("built_major", &UcxVersions::built_major)
      .def_ro("built_minor", &UcxVersions::built_minor)
      .def_ro("loaded_major", &UcxVersions::loaded_major)
      .def_ro("loaded_minor", &UcxVersions::loaded_minor)
      .def_ro("loaded_release", &UcxVersions::loaded_release)
      .def_ro("loaded_library", &UcxVersions::loaded_library)
      .def("loaded_older", &UcxVersions::loaded_older);
  m.def("ucx_versions", &ucx_versions);
  m.def("check_ucx_version", &check_ucx_version);

  nb::class_<TensorView>(m, "TensorView")
      .def(nb::init<>())
      .def(
          "__init__",
          [](TensorView* self, uintptr_t data, DataType dtype, std::vector<int64_t> shape,
             std::vector<int64_t> strides) {
            new (self) TensorView(reinterpret_cast<const void*>(data), dtype, std::move(shape), std::move(strides));
          },
          nb::arg("data"), nb::arg("dtype"), nb::arg("shape"), nb::arg("strides") = std::vector<int64_t>{})
      .def_prop_ro("data", [](const TensorView& v) { return reinterpret_cast<uintptr_t>(v.data); })
      .def_ro("dtype", &TensorView::dtype)
      .def_ro("shape", &TensorView::shape)
      .def_ro("strides", &TensorView::strides)
      .def("__repr__", &TensorView::describe);
}

// NOTE [Python bootstrap callbacks]: a Communicator made from Python callables
// (ferry.init wraps the torch.distributed group's collectives) keeps them for its
// whole life: EpBuffer, AllReduce, Window and Communicator.barrier() use the
// bootstrap after construction. The references live in this Bootstrap, out of the
// garbage collector's sight unless the Communicator's type reports them: it does
// (communicator_traverse), so a cycle through them (a callable that refers back to
// its Communicator) is collected like any Python cycle instead of keeping the
// Communicator, and all it holds, alive until (and past) interpreter exit.
// tp_clear drops them: a Communicator the collector clears is garbage, nothing
// calls its bootstrap again (a call would raise BootstrapError).
//
// all_gather(bytes) must return the concatenation of every rank's bytes, in rank
// order. The calls take the GIL (their callers may have released it).
class PyCallbackBootstrap final : public Bootstrap {
 public:
  PyCallbackBootstrap(int rank, int size, nb::callable all_gather, nb::callable barrier)
      : rank_(rank), size_(size), all_gather_(std::move(all_gather)), barrier_(std::move(barrier)) {
    FERRY_ARG_CHECK(size >= 1, "communicator_from_callbacks: size must be >= 1, got " << size);
    FERRY_ARG_CHECK(rank >= 0 && rank < size,
                    "communicator_from_callbacks: rank must be in [0, " << size << "), got " << rank);
  }
  PyCallbackBootstrap(const PyCallbackBootstrap&) = delete;
  PyCallbackBootstrap& operator=(const PyCallbackBootstrap&) = delete;

  ~PyCallbackBootstrap() override {
    if (!nb::is_alive()) {  // past interpreter teardown: nothing left to release them to
      all_gather_.release();
      barrier_.release();
      return;
    }
    nb::gil_scoped_acquire gil;
    all_gather_.reset();
    barrier_.reset();
  }

  int rank() const override { return rank_; }
  int size() const override { return size_; }

  void all_gather(const void* send, void* recv, size_t bytes_per_rank) override {
    FERRY_ARG_CHECK(bytes_per_rank == 0 || (send != nullptr && recv != nullptr),
                    "all_gather: null buffer with bytes_per_rank " << bytes_per_rank);
    nb::gil_scoped_acquire gil;
    nb::object fn = callback(all_gather_, "all_gather");
    nb::bytes mine(static_cast<const char*>(send), bytes_per_rank);
    nb::object result = fn(mine);
    if (!nb::isinstance<nb::bytes>(result)) {
      FERRY_THROW(BootstrapError, "all_gather callback returned " << nb::inst_name(result).c_str()
                                                                   << ", expected bytes");
    }
    nb::bytes gathered = nb::borrow<nb::bytes>(result);
    size_t expected = bytes_per_rank * static_cast<size_t>(size_);
    if (gathered.size() != expected) {
      FERRY_THROW(BootstrapError, "all_gather callback returned " << gathered.size() << " bytes, expected "
                                                                   << expected << " (" << size_ << " ranks x "
                                                                   << bytes_per_rank << ")");
    }
    if (expected > 0) std::memcpy(recv, gathered.c_str(), expected);
  }

  void barrier() override {
    nb::gil_scoped_acquire gil;
    callback(barrier_, "barrier")();
  }

  // The garbage collector's view (GIL held).
  int traverse(visitproc visit, void* arg) {
    Py_VISIT(all_gather_.ptr());
    Py_VISIT(barrier_.ptr());
    return 0;
  }
  void clear() {
    // Fields first, references after: a callable's teardown may run Python code.
    nb::object all_gather = std::move(all_gather_);
    nb::object barrier = std::move(barrier_);
  }

 private:
  // A new reference, so a call survives a clear() that the call itself triggers.
  static nb::object callback(const nb::object& fn, const char* name) {
    if (!fn.is_valid()) {
      FERRY_THROW(BootstrapError, "the " << name << " callback of this communicator was released "
                                            "(the Communicator was garbage-collected)");
    }
    return fn;
  }

  int rank_;
  int size_;
  nb::object all_gather_;
  nb::object barrier_;
};

PyCallbackBootstrap* callback_bootstrap(PyObject* self) {
  if (!nb::inst_ready(self)) return nullptr;  // not constructed (or already destroyed)
  return dynamic_cast<PyCallbackBootstrap*>(&nb::inst_ptr<Communicator>(self)->bootstrap());
}

int communicator_traverse(PyObject* self, visitproc visit, void* arg) {
  Py_VISIT(Py_TYPE(self));  // heap type instances own a reference to their type
  PyCallbackBootstrap* bootstrap = callback_bootstrap(self);
  return bootstrap != nullptr ? bootstrap->traverse(visit, arg) : 0;
}

int communicator_clear(PyObject* self) {
  if (PyCallbackBootstrap* bootstrap = callback_bootstrap(self)) bootstrap->clear();
  return 0;
}

PyType_Slot communicator_slots[] = {
    {Py_tp_traverse, reinterpret_cast<void*>(communicator_traverse)},
    {Py_tp_clear, reinterpret_cast<void*>(communicator_clear)},
    {0, nullptr},
};

// Bootstrap from Python callables (the torch.distributed group's collectives).
// Collective: the Communicator's setup calls them.
std::shared_ptr<Communicator> communicator_from_callbacks(int rank, int size, nb::callable all_gather,
                                                           nb::callable barrier, int device, int64_t timeout_ms) {
  auto bootstrap = std::make_shared<PyCallbackBootstrap>(rank, size, std::move(all_gather), std::move(barrier));
  CommunicatorOptions options;
  options.device = device;
  options.timeout = std::chrono::milliseconds(timeout_ms);
  return std::make_shared<Communicator>(bootstrap, options);
}

std::shared_ptr<Communicator> communicator_from_mpi(int device, int64_t timeout_ms) {
  CommunicatorOptions options;
  options.device = device;
  options.timeout = std::chrono::milliseconds(timeout_ms);
  return std::make_shared<Communicator>(std::make_shared<MpiBootstrap>(), options);
}

void bind_communicator(nb::module_& m) {
  nb::class_<Communicator>(m, "Communicator", nb::type_slots(communicator_slots))
      .def_prop_ro("rank", &Communicator::rank)
      .def_prop_ro("size", &Communicator::size)
      .def_prop_ro("local_rank", &Communicator::local_rank)
      .def_prop_ro("local_size", &Communicator::local_size)
      .def_prop_ro("device", &Communicator::device)
      .def_prop_ro("num_sms", &Communicator::num_sms)
      .def_prop_ro("aborted", &Communicator::aborted)
      .def("check", &Communicator::check, "Raises the error a kernel recorded (timeout), if any.")
      .def(
          "synchronize",
          [](const Communicator& c, uintptr_t stream) {
            nb::gil_scoped_release release;  // a long wait must not hold the GIL
            c.synchronize(reinterpret_cast<cudaStream_t>(stream));
          },
          nb::arg("stream"))
      .def("barrier", [](Communicator& c) { c.bootstrap().barrier(); })
      .def("abort", &Communicator::abort, nb::arg("reason"));
  m.def("communicator_from_callbacks", &communicator_from_callbacks, nb::arg("rank"), nb::arg("size"),
        nb::arg("all_gather"), nb::arg("barrier"), nb::arg("device") = -1, nb::arg("timeout_ms") = 0);
  m.def("communicator_from_mpi", &communicator_from_mpi, nb::arg("device") = -1, nb::arg("timeout_ms") = 0);
}

}  // namespace
}  // namespace ferry::python

NB_MODULE(_C, m) {
  m.doc() = "ferry's compiled core (see the ferry package for the PyTorch layer)";
  ferry::python::register_exceptions(m);
  ferry::python::bind_types(m);
  ferry::python::bind_communicator(m);
  ferry::python::bind_allreduce(m);
  ferry::python::bind_ep(m);
}
