// The NpuOptimizer Grappler custom graph optimizer: a byte-moving shim.
//
// It registers "NpuOptimizer" with Grappler's CustomGraphOptimizerRegistry and,
// for every graph Grappler hands it, calls the Python entry point
// npu_sim_bridge.native.entry.optimize() with serialized bytes and plain lists:
//
//   optimize(item_id, graph_def_bytes, fetch, feed, preserve, config_bytes)
//       -> bytes of the rewritten GraphDef
//
// All decisions live in Python. This file only serializes, calls and parses.

#include <Python.h>

#include <string>
#include <vector>

#include "tensorflow/core/framework/graph.pb.h"
#include "tensorflow/core/grappler/grappler_item.h"
#include "tensorflow/core/grappler/optimizers/custom_graph_optimizer.h"
#include "tensorflow/core/grappler/optimizers/custom_graph_optimizer_registry.h"
#include "tensorflow/core/platform/errors.h"

namespace npu_sim_bridge {
namespace {

using tensorflow::GraphDef;
using tensorflow::RewriterConfig_CustomGraphOptimizer;
using tensorflow::Status;
using tensorflow::grappler::Cluster;
using tensorflow::grappler::CustomGraphOptimizer;
using tensorflow::grappler::GrapplerItem;

constexpr char kEntryModule[] = "npu_sim_bridge.native.entry";
constexpr char kEntryFunction[] = "optimize";

// Holds the GIL for the lifetime of the object.
class GilLock {
 public:
  GilLock() : state_(PyGILState_Ensure()) {}
  ~GilLock() { PyGILState_Release(state_); }

 private:
  PyGILState_STATE state_;
};

// Owns one Python reference.
class PyRef {
 public:
  explicit PyRef(PyObject* obj = nullptr) : obj_(obj) {}
  ~PyRef() { Py_XDECREF(obj_); }
  PyRef(const PyRef&) = delete;
  PyRef& operator=(const PyRef&) = delete;
  PyObject* get() const { return obj_; }
  explicit operator bool() const { return obj_ != nullptr; }

 private:
  PyObject* obj_;
};

// Turns the pending Python exception into text and clears it.
std::string FetchPythonError() {
  PyObject *type = nullptr, *value = nullptr, *traceback = nullptr;
  PyErr_Fetch(&type, &value, &traceback);
  PyErr_NormalizeException(&type, &value, &traceback);
  PyRef type_ref(type), value_ref(value), traceback_ref(traceback);
  if (value == nullptr) return "unknown Python error";
  PyRef text(PyObject_Str(value));
  if (!text) {
    PyErr_Clear();
    return "unprintable Python error";
  }
  const char* utf8 = PyUnicode_AsUTF8(text.get());
  if (utf8 == nullptr) {
    PyErr_Clear();
    return "unprintable Python error";
  }
  return utf8;
}

PyObject* ToPyList(const std::vector<std::string>& names) {
  PyObject* list = PyList_New(static_cast<Py_ssize_t>(names.size()));
  if (list == nullptr) return nullptr;
  for (size_t i = 0; i < names.size(); ++i) {
    PyObject* item = PyUnicode_FromStringAndSize(
        names[i].data(), static_cast<Py_ssize_t>(names[i].size()));
    if (item == nullptr) {
      Py_DECREF(list);
      return nullptr;
    }
    PyList_SET_ITEM(list, static_cast<Py_ssize_t>(i), item);
  }
  return list;
}

PyObject* ToPyBytes(const std::string& data) {
  return PyBytes_FromStringAndSize(data.data(),
                                   static_cast<Py_ssize_t>(data.size()));
}

class NpuOptimizer : public CustomGraphOptimizer {
 public:
  std::string name() const override { return "NpuOptimizer"; }

  bool UsesFunctionLibrary() const override { return true; }

  Status Init(const RewriterConfig_CustomGraphOptimizer* config) override {
    config_bytes_.clear();
    if (config != nullptr && !config->SerializeToString(&config_bytes_)) {
      return tensorflow::errors::Internal(
          "NpuOptimizer: could not serialize its custom optimizer config");
    }
    return Status();
  }

  Status Optimize(Cluster* /*cluster*/, const GrapplerItem& item,
                  GraphDef* optimized_graph) override {
    std::string graph_bytes;
    if (!item.graph.SerializeToString(&graph_bytes)) {
      return tensorflow::errors::Internal(
          "NpuOptimizer: could not serialize the graph of item ", item.id);
    }
    std::vector<std::string> feed;
    feed.reserve(item.feed.size());
    for (const auto& fed : item.feed) feed.push_back(fed.first);
    const auto preserved = item.NodesToPreserve();
    std::vector<std::string> preserve(preserved.begin(), preserved.end());

    std::string result;
    {
      if (!Py_IsInitialized()) {
        return tensorflow::errors::FailedPrecondition(
            "NpuOptimizer needs a running Python interpreter: load it with "
            "`import npu_sim_bridge`");
      }
      GilLock gil;
      PyRef module(PyImport_ImportModule(kEntryModule));
      if (!module) {
        return tensorflow::errors::Internal("NpuOptimizer: cannot import ",
                                            kEntryModule, ": ",
                                            FetchPythonError());
      }
      PyRef function(PyObject_GetAttrString(module.get(), kEntryFunction));
      if (!function) {
        return tensorflow::errors::Internal("NpuOptimizer: ", kEntryModule,
                                            " has no ", kEntryFunction, ": ",
                                            FetchPythonError());
      }
      PyRef args(Py_BuildValue("(NNNNNN)",
                               PyUnicode_FromStringAndSize(
                                   item.id.data(),
                                   static_cast<Py_ssize_t>(item.id.size())),
                               ToPyBytes(graph_bytes), ToPyList(item.fetch),
                               ToPyList(feed), ToPyList(preserve),
                               ToPyBytes(config_bytes_)));
      if (!args) {
        return tensorflow::errors::Internal(
            "NpuOptimizer: cannot build the call arguments: ",
            FetchPythonError());
      }
      PyRef returned(PyObject_CallObject(function.get(), args.get()));
      if (!returned) {
        return tensorflow::errors::Internal("NpuOptimizer: ", kEntryModule,
                                            ".", kEntryFunction, " failed: ",
                                            FetchPythonError());
      }
      char* data = nullptr;
      Py_ssize_t size = 0;
      if (PyBytes_AsStringAndSize(returned.get(), &data, &size) != 0) {
        return tensorflow::errors::Internal(
            "NpuOptimizer: the Python entry must return bytes: ",
            FetchPythonError());
      }
      result.assign(data, static_cast<size_t>(size));
    }
    if (!optimized_graph->ParseFromString(result)) {
      return tensorflow::errors::Internal(
          "NpuOptimizer: the Python entry returned bytes that are not a "
          "GraphDef");
    }
    return Status();
  }

 private:
  std::string config_bytes_;
};

REGISTER_GRAPH_OPTIMIZER_AS(NpuOptimizer, "NpuOptimizer");

}  // namespace
}  // namespace npu_sim_bridge
