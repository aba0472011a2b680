// The NpuOptimizer Grappler custom graph optimizer: a byte-moving shim.
//
// It registers "NpuOptimizer" with Grappler's CustomGraphOptimizerRegistry and,
// for every graph Grappler hands it, calls the Python entry point
// npu_sim_bridge.native.entry.optimize() with serialized bytes and plain lists:
//
//   optimize(item_id, graph_def_bytes, fetch, feed, preserve, config_bytes, columns)
//       -> bytes of the rewritten GraphDef
//
// `columns` is the graph's nodes as columns (names, ops, inputs, main dtypes, ...; see NodeColumns),
// read from the GraphDef the shim already holds: the Python side indexes the graph from them
// instead of reading every node's fields back through protobuf.
//
// All decisions live in Python. This file serializes, calls and parses, and exports a few kernels
// the Python side calls through ctypes where a sweep over every node or unit is too slow in Python
// (each has a Python twin, used where the shim is not loaded, and a test that compares the two).
// One shortcut:
// a function item (If/While branches, gradients, a GeOp body) whose every node carries the stamp
// its caller's rewrite left is answered "nothing to do" (Grappler keeps it as it came), as the entry
// would hand it back unchanged (pipeline.covered_by_caller), without a copy of its bytes crossing
// to Python and back. Grappler
// hands over every library function after the graph that calls it, hundreds in a Keras model.
//
// One exception, because Grappler runs the original graph when an optimizer returns an error
// status: if the Python call itself fails (the entry could not even build its error graph), the
// shim returns the graph plus an Assert with a fixed ASCII message that every fetched node waits
// on, so the run fails instead of silently running unrewritten.
//
// A last check, also without logic of its own: a graph optimization pass that runs after Grappler
// fails the run of a Session whose config names a custom optimizer holding "npu" (NpuOptimizer or
// a misspelling) when no node of the graph carries the stamp the Python pipeline leaves (or the
// error scope): Grappler skipped it (a name nobody registered, fewer nodes than min_graph_nodes,
// disable_meta_optimizer, a failing meta optimizer), and the graph would otherwise run
// unrewritten without a word.
//
// The same class is also registered under common misspellings of the name (NPUOptimizer, ...);
// Grappler ignores a custom optimizer name nobody registered, so without these a typo would run
// the plain graph. The entry reads the name from the config and turns it into a clear error.

#include <Python.h>

#include <algorithm>
#include <memory>
#include <cctype>
#include <cstdint>
#include <string>
#include <string_view>
#include <unordered_map>
#include <utility>
#include <vector>

#include "tensorflow/core/common_runtime/optimization_registry.h"
#include "google/protobuf/io/coded_stream.h"
#include "google/protobuf/io/zero_copy_stream_impl_lite.h"
#include "tensorflow/core/framework/function.pb.h"
#include "tensorflow/core/framework/graph.pb.h"
#include "tensorflow/core/public/session_options.h"
#include "tensorflow/core/framework/node_def.pb.h"
#include "tensorflow/core/framework/tensor.pb.h"
#include "tensorflow/core/framework/types.pb.h"
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

constexpr char kSeenAttr[] = "_npu_sim_seen";       // graph/attr_names.py SEEN_ATTR (the Python names' one module)
constexpr char kErrorScope[] = "npu_sim_error/";     // native/entry.py ERROR_SCOPE
constexpr char kOptionsAttr[] = "_npu_sim_options";  // graph/attr_names.py OPTIONS_ATTR
constexpr char kRegisteredName[] = "NpuOptimizer";   // native/entry.py NPU_OPTIMIZER
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

// The graph plus Assert(false, message) that every fetched node waits on; no other decision.
void FailingGraph(const GrapplerItem& item, const std::string& message, GraphDef* out) {
  *out = item.graph;
  std::string device;
  for (const auto& node : item.graph.node()) {
    if (!node.device().empty()) {
      device = node.device();
      break;
    }
  }
  auto* text = out->add_node();
  text->set_name("npu_sim_error/shim_message");
  text->set_op("Const");
  text->set_device(device);
  (*text->mutable_attr())["dtype"].set_type(tensorflow::DT_STRING);
  auto* text_value = (*text->mutable_attr())["value"].mutable_tensor();
  text_value->set_dtype(tensorflow::DT_STRING);
  text_value->add_string_val(message);
  auto* condition = out->add_node();
  condition->set_name("npu_sim_error/shim_condition");
  condition->set_op("Const");
  condition->set_device(device);
  (*condition->mutable_attr())["dtype"].set_type(tensorflow::DT_BOOL);
  auto* condition_value = (*condition->mutable_attr())["value"].mutable_tensor();
  condition_value->set_dtype(tensorflow::DT_BOOL);
  condition_value->add_bool_val(false);
  auto* check = out->add_node();
  check->set_name("npu_sim_error/shim_assert");
  check->set_op("Assert");
  check->set_device(device);
  check->add_input(condition->name());
  check->add_input(text->name());
  (*check->mutable_attr())["T"].mutable_list()->add_type(tensorflow::DT_STRING);
  (*check->mutable_attr())["summarize"].set_i(1);
  std::vector<std::string> targets;
  for (const auto& fetched : item.fetch) {
    targets.push_back(fetched.substr(0, fetched.find(':')));
  }
  const int count = out->node_size() - 3;
  for (int i = 0; i < count; ++i) {
    auto* node = out->mutable_node(i);
    bool target = targets.empty();
    for (const auto& name : targets) target = target || node->name() == name;
    if (target) node->add_input("^npu_sim_error/shim_assert");
  }
}

PyObject* ToPyBytes(const std::string& data) {
  return PyBytes_FromStringAndSize(data.data(),
                                   static_cast<Py_ssize_t>(data.size()));
}

// One Python str per distinct text: an input that names a node is the object of the node's name, so
// the Python side's dicts hash each text once. Owns a reference to each str it made.
class Interner {
 public:
  ~Interner() {
    for (auto& entry : made_) Py_DECREF(entry.second);
  }
  // A new reference, or nullptr with a Python error set. `text` must outlive the interner.
  PyObject* Get(std::string_view text) {
    auto found = made_.find(text);
    if (found != made_.end()) {
      Py_INCREF(found->second);
      return found->second;
    }
    PyObject* made = PyUnicode_FromStringAndSize(text.data(), static_cast<Py_ssize_t>(text.size()));
    if (made == nullptr) return nullptr;
    made_.emplace(text, made);  // the view points into the GraphDef, alive for the call
    Py_INCREF(made);
    return made;
  }

 private:
  std::unordered_map<std::string_view, PyObject*> made_;
};

// The main dtype of a node, as graph/table.py main_dtype reads it (keep the two alike): the first of
// these attrs holding a type, else the first type of these list attrs; DT_INVALID (0) for none.
int MainDtype(const tensorflow::NodeDef& node) {
  static const char* const kTypeAttrs[] = {"T", "dtype", "DstT", "Tparams", "out_type"};
  static const char* const kListAttrs[] = {"T", "Tin", "dtypes"};
  const auto& attrs = node.attr();
  for (const char* key : kTypeAttrs) {
    auto found = attrs.find(key);
    if (found != attrs.end() && found->second.value_case() == tensorflow::AttrValue::kType) {
      return found->second.type();
    }
  }
  for (const char* key : kListAttrs) {
    auto found = attrs.find(key);
    if (found != attrs.end() && found->second.list().type_size() > 0) {
      return found->second.list().type(0);
    }
  }
  return tensorflow::DT_INVALID;
}

// The alike key of one FunctionDef: equal for two functions exactly when graph/alike.py alike_body
// gives them equal bytes (the same body but for the names of the function and its arguments,
// argument attrs and handle data, shape attrs). Not those bytes: an encoding of the same content,
// read from the function as it is (no copy), every part length-prefixed and every map in key order.
class AlikeEncoder {
 public:
  std::string Encode(const tensorflow::FunctionDef& function) {
    out_.clear();
    positional_.clear();
    tensorflow::OpDef signature(function.signature());
    signature.clear_name();
    for (int i = 0; i < signature.input_arg_size(); ++i) {
      auto* arg = signature.mutable_input_arg(i);
      std::string place = "%" + std::to_string(i);
      positional_[arg->name()] = place;
      arg->set_name(place);
      arg->clear_handle_data();
    }
    for (auto& arg : *signature.mutable_output_arg()) arg.clear_handle_data();
    PutMessage(signature);
    PutAttrs(function.attr(), [](const std::string& key) { return key == "_input_shapes"; });
    std::vector<std::pair<uint32_t, uint32_t>> unique(function.resource_arg_unique_id().begin(),
                                                      function.resource_arg_unique_id().end());
    std::sort(unique.begin(), unique.end());
    PutCount(unique.size());
    for (const auto& entry : unique) {
      Put(std::to_string(entry.first));
      Put(std::to_string(entry.second));
    }
    PutCount(function.node_def_size());
    for (const auto& node : function.node_def()) {
      Put(node.name());
      Put(node.op());
      PutCount(node.input_size());
      for (const auto& input : node.input()) Put(Renamed(input));
      Put(node.device());
      PutMessage(node.experimental_debug_info());
      PutCount(node.has_experimental_type() ? 1 : 0);
      if (node.has_experimental_type()) PutMessage(node.experimental_type());
      PutAttrs(node.attr(), IsShapeAttr);
    }
    PutSorted(function.ret(), true);
    PutSorted(function.control_ret(), false);
    return out_;
  }

  // Whether this encoder knows every field of FunctionDef and NodeDef (a newer TensorFlow may add some).
  static bool KnowsTheFields() {
    return tensorflow::FunctionDef::descriptor()->field_count() == 7 &&
           tensorflow::NodeDef::descriptor()->field_count() == 7;
  }

 private:
  static bool IsShapeAttr(const std::string& key) {
    for (const char* shape : {"_output_shapes", "output_shapes", "shape", "shapes", "element_shape"}) {
      if (key == shape) return true;
    }
    return false;
  }

  // "^" or "", the node part, then the rest from the first ':': the node part renamed by position.
  std::string Renamed(const std::string& text) const {
    const size_t start = (!text.empty() && text[0] == '^') ? 1 : 0;
    const size_t colon = text.find(':', start);
    const size_t end = colon == std::string::npos ? text.size() : colon;
    auto found = positional_.find(text.substr(start, end - start));
    if (found == positional_.end()) return text;
    std::string renamed(text);
    renamed.replace(start, end - start, found->second);
    return renamed;
  }

  void PutCount(size_t count) { Put(std::to_string(count)); }

  void Put(std::string_view part) {
    const uint64_t size = part.size();
    out_.append(reinterpret_cast<const char*>(&size), sizeof(size));
    out_.append(part.data(), part.size());
  }

  void PutMessage(const google::protobuf::MessageLite& message) {
    scratch_.clear();
    {
      google::protobuf::io::StringOutputStream stream(&scratch_);
      google::protobuf::io::CodedOutputStream coded(&stream);
      coded.SetSerializationDeterministic(true);
      message.SerializeToCodedStream(&coded);
    }
    Put(scratch_);
  }

  template <typename Skip>
  void PutAttrs(const google::protobuf::Map<std::string, tensorflow::AttrValue>& attrs, Skip skip) {
    std::vector<const std::string*> keys;
    keys.reserve(attrs.size());
    for (const auto& entry : attrs) {
      if (!skip(entry.first)) keys.push_back(&entry.first);
    }
    std::sort(keys.begin(), keys.end(), [](const std::string* a, const std::string* b) { return *a < *b; });
    PutCount(keys.size());
    for (const std::string* key : keys) {
      Put(*key);
      PutMessage(attrs.at(*key));
    }
  }

  void PutSorted(const google::protobuf::Map<std::string, std::string>& entries, bool rename) {
    std::vector<std::pair<std::string_view, std::string_view>> sorted(entries.begin(), entries.end());
    std::sort(sorted.begin(), sorted.end());
    PutCount(sorted.size());
    for (const auto& entry : sorted) {
      Put(entry.first);
      Put(rename ? Renamed(std::string(entry.second)) : std::string(entry.second));
    }
  }

  std::string out_, scratch_;
  std::unordered_map<std::string, std::string> positional_;
};

// The graph the shim hands over, for the Python side to ask about while the call lasts (the shim
// clears `graph` when it returns), and what NodeColumns worked out of it.
struct GraphHandle {
  const GraphDef* graph = nullptr;
  std::unique_ptr<GraphDef> owned;  // NpuSimColumns' graph: the handle keeps it alive
  PyObject* names = nullptr;        // the names column (a reference of the handle's own)
  std::vector<int32_t> producer;    // per input, in node then input order: the producer's node, or -1
  ~GraphHandle() { Py_XDECREF(names); }
};
constexpr char kGraphHandleName[] = "npu_sim_bridge.graph";

void FreeGraphHandle(PyObject* capsule) {
  delete static_cast<GraphHandle*>(PyCapsule_GetPointer(capsule, kGraphHandleName));
}

// The handle of a live graph, or nullptr with a Python error set.
GraphHandle* LiveGraph(PyObject* capsule, const char* asked) {
  auto* handle = static_cast<GraphHandle*>(PyCapsule_GetPointer(capsule, kGraphHandleName));
  if (handle != nullptr && handle->graph == nullptr) {
    PyErr_Format(PyExc_RuntimeError,
                 "%s reads the graph NpuOptimizer handed over, which is gone once the call returns: "
                 "ask during the call", asked);
    return nullptr;
  }
  return handle;
}

// alike_bodies(names) -> {name: AlikeEncoder's key of that library function}, for the names the
// library has; {} when the encoder does not know every field of this TensorFlow's protos.
PyObject* AlikeBodies(PyObject* self, PyObject* names) {
  GraphHandle* handle = LiveGraph(self, "alike_bodies");
  if (handle == nullptr) return nullptr;
  if (!AlikeEncoder::KnowsTheFields()) {  // the Python side works the keys out itself
    return PyDict_New();
  }
  PyRef wanted(PySet_New(names));
  PyRef result(PyDict_New());
  if (!wanted || !result) return nullptr;
  AlikeEncoder encoder;
  for (const auto& function : handle->graph->library().function()) {
    const std::string& name = function.signature().name();
    PyRef key(PyUnicode_FromStringAndSize(name.data(), static_cast<Py_ssize_t>(name.size())));
    if (!key) return nullptr;
    const int asked = PySet_Contains(wanted.get(), key.get());
    if (asked < 0) return nullptr;
    if (!asked) continue;
    PyRef body(ToPyBytes(encoder.Encode(function)));
    if (!body || PyDict_SetItem(result.get(), key.get(), body.get()) != 0) return nullptr;
  }
  Py_INCREF(result.get());
  return result.get();
}

PyMethodDef kAlikeBodiesDef = {"alike_bodies", AlikeBodies, METH_O,
                               "{name: alike key} of the named library functions (graph/alike.py)"};

// The node an input string names, as graph/names.py parse_input reads it: "^x" and "x:N" name x.
std::string_view ProducerOf(std::string_view text) {
  if (!text.empty() && text[0] == '^') return text.substr(1);
  const size_t colon = text.rfind(':');
  if (colon == std::string_view::npos || colon + 1 == text.size()) return text;
  for (size_t i = colon + 1; i < text.size(); ++i) {
    if (text[i] < '0' || text[i] > '9') return text;
  }
  return text.substr(0, colon);
}

// consumers() -> {producer: consumers}, as GraphView indexes the graph: producers in the order their
// first edge comes (a missing producer by the name the input gives); its consumers in GraphDef order,
// once per edge, as a list, or as the consumer's name where there is one edge.
PyObject* Consumers(PyObject* self, PyObject* /*unused*/) {
  GraphHandle* handle = LiveGraph(self, "consumers");
  if (handle == nullptr) return nullptr;
  const GraphDef& graph = *handle->graph;
  PyRef consumers(PyDict_New());
  if (!consumers) return nullptr;
  size_t edge = 0;
  for (int i = 0; i < graph.node_size(); ++i) {
    PyObject* name = PyList_GET_ITEM(handle->names, i);  // borrowed
    for (const auto& input : graph.node(i).input()) {
      const int32_t at = handle->producer[edge++];
      const std::string_view text = at >= 0 ? std::string_view() : ProducerOf(input);
      PyRef missing(at >= 0 ? nullptr
                            : PyUnicode_FromStringAndSize(text.data(), static_cast<Py_ssize_t>(text.size())));
      if (at < 0 && !missing) return nullptr;
      PyObject* key = at >= 0 ? PyList_GET_ITEM(handle->names, at) : missing.get();  // borrowed
      PyObject* users = PyDict_GetItemWithError(consumers.get(), key);  // borrowed
      if (users == nullptr) {  // a lone consumer is held as its name
        if (PyErr_Occurred() || PyDict_SetItem(consumers.get(), key, name) != 0) return nullptr;
      } else if (PyUnicode_CheckExact(users)) {
        PyRef both(PyList_New(2));
        if (!both) return nullptr;
        Py_INCREF(users);
        PyList_SET_ITEM(both.get(), 0, users);
        Py_INCREF(name);
        PyList_SET_ITEM(both.get(), 1, name);
        if (PyDict_SetItem(consumers.get(), key, both.get()) != 0) return nullptr;
      } else if (PyList_Append(users, name) != 0) {
        return nullptr;
      }
    }
  }
  Py_INCREF(consumers.get());
  return consumers.get();
}

PyMethodDef kConsumersDef = {"consumers", Consumers, METH_NOARGS,
                             "{producer: consumer name, or [consumer per edge]} of the graph (graph/view.py)"};

// reached(starts) -> bytes, one per node in GraphDef order: 1 for the nodes the positions in `starts`
// reach through data and control inputs (themselves included), as report/roles.py reads a fetch.
PyObject* Reached(PyObject* self, PyObject* starts) {
  GraphHandle* handle = LiveGraph(self, "reached");
  if (handle == nullptr) return nullptr;
  const GraphDef& graph = *handle->graph;
  const int count = graph.node_size();
  std::vector<size_t> first(static_cast<size_t>(count) + 1, 0);  // where each node's inputs start in `producer`
  for (int i = 0; i < count; ++i) first[i + 1] = first[i] + static_cast<size_t>(graph.node(i).input_size());
  if (first[count] != handle->producer.size()) {
    PyErr_SetString(PyExc_RuntimeError, "reached: the graph changed since its columns were read");
    return nullptr;
  }
  std::string seen(static_cast<size_t>(count), '\0');
  std::vector<int32_t> stack;
  PyRef iterator(PyObject_GetIter(starts));
  if (!iterator) return nullptr;
  while (PyObject* item = PyIter_Next(iterator.get())) {
    const long at = PyLong_AsLong(item);
    Py_DECREF(item);
    if (at == -1 && PyErr_Occurred()) return nullptr;
    if (at < 0 || at >= count) {
      PyErr_Format(PyExc_IndexError, "reached: no node at position %ld (the graph has %d)", at, count);
      return nullptr;
    }
    if (!seen[at]) {
      seen[at] = 1;
      stack.push_back(static_cast<int32_t>(at));
    }
  }
  if (PyErr_Occurred()) return nullptr;
  while (!stack.empty()) {
    const int32_t node = stack.back();
    stack.pop_back();
    for (size_t edge = first[node]; edge < first[node + 1]; ++edge) {
      const int32_t producer = handle->producer[edge];
      if (producer >= 0 && !seen[producer]) {
        seen[producer] = 1;
        stack.push_back(producer);
      }
    }
  }
  return ToPyBytes(seen);
}

PyMethodDef kReachedDef = {"reached", Reached, METH_O,
                           "bytes, 1 per node the given positions reach through their inputs (report/roles.py)"};

// The graph's nodes as columns, the shape graph/table.py NodeTable.from_columns takes:
// (names, ops, inputs (per node: its lone input string, else a tuple of them), main dtypes, nodes without the stamp,
// the option digests earlier runs left, alike_bodies, whether every edge runs forward in GraphDef
// order (edges out of NextIteration nodes and from missing nodes aside), consumers, reached). The
// callables read `capsule`'s graph, and fill its handle. New reference, or nullptr with a Python
// error set.
PyObject* NodeColumns(PyObject* capsule) {
  auto* handle = static_cast<GraphHandle*>(PyCapsule_GetPointer(capsule, kGraphHandleName));
  if (handle == nullptr) return nullptr;
  const GraphDef& graph = *handle->graph;
  const Py_ssize_t count = graph.node_size();
  Interner texts;
  PyRef names(PyList_New(count)), ops(PyList_New(count)), inputs(PyList_New(count)),
      dtypes(PyList_New(count)), digests(PyList_New(0));
  if (!names || !ops || !inputs || !dtypes || !digests) return nullptr;
  std::unordered_map<std::string_view, int32_t> position;
  position.reserve(static_cast<size_t>(count));
  for (int i = 0; i < graph.node_size(); ++i) position.emplace(graph.node(i).name(), i);
  handle->producer.clear();
  bool forward = true;
  long unstamped = 0;
  for (Py_ssize_t i = 0; i < count; ++i) {
    const tensorflow::NodeDef& node = graph.node(static_cast<int>(i));
    PyObject* name = texts.Get(node.name());
    PyObject* op = texts.Get(node.op());
    PyObject* dtype = PyLong_FromLong(MainDtype(node));
    const int input_count = node.input_size();
    // A node's inputs as graph/view.py holds them: the str of a lone input, else a tuple.
    PyObject* held = input_count == 1 ? texts.Get(node.input(0)) : PyTuple_New(input_count);
    if (name == nullptr || op == nullptr || dtype == nullptr || held == nullptr) {
      Py_XDECREF(name);
      Py_XDECREF(op);
      Py_XDECREF(dtype);
      Py_XDECREF(held);
      return nullptr;
    }
    PyList_SET_ITEM(names.get(), i, name);
    PyList_SET_ITEM(ops.get(), i, op);
    PyList_SET_ITEM(dtypes.get(), i, dtype);
    PyList_SET_ITEM(inputs.get(), i, held);
    for (int j = 0; j < input_count; ++j) {
      if (input_count != 1) {
        PyObject* text = texts.Get(node.input(j));
        if (text == nullptr) return nullptr;
        PyTuple_SET_ITEM(held, j, text);
      }
      auto at = position.find(ProducerOf(node.input(j)));
      const int32_t producer = at == position.end() ? -1 : at->second;
      handle->producer.push_back(producer);
      if (forward && producer >= i) {
        const std::string& producer_op = graph.node(producer).op();
        forward = producer_op == "NextIteration" || producer_op == "RefNextIteration";
      }
    }
    const auto& attrs = node.attr();
    if (!attrs.contains(kSeenAttr)) ++unstamped;
    auto digest = attrs.find(kOptionsAttr);
    if (digest != attrs.end()) {
      PyRef text(PyUnicode_DecodeASCII(digest->second.s().data(),
                                       static_cast<Py_ssize_t>(digest->second.s().size()), "replace"));
      if (!text || PyList_Append(digests.get(), text.get()) != 0) return nullptr;
    }
  }
  Py_XDECREF(handle->names);
  handle->names = names.get();
  Py_INCREF(handle->names);
  PyRef alike_bodies(PyCFunction_New(&kAlikeBodiesDef, capsule));
  PyRef consumers(PyCFunction_New(&kConsumersDef, capsule));
  PyRef reached(PyCFunction_New(&kReachedDef, capsule));
  if (!alike_bodies || !consumers || !reached) return nullptr;
  return Py_BuildValue("(OOOOlOOOOO)", names.get(), ops.get(), inputs.get(), dtypes.get(), unstamped,
                       digests.get(), alike_bodies.get(), forward ? Py_True : Py_False,
                       consumers.get(), reached.get());
}

class NpuOptimizer : public CustomGraphOptimizer {
 public:
  explicit NpuOptimizer(std::string name) : name_(std::move(name)) {}

  std::string name() const override { return name_; }

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
    // A misspelled name always reaches the entry, which answers it with an error.
    if (name_ == kRegisteredName && CoveredByCaller(item.graph)) {
      // Grappler's convention for "this optimizer changed nothing": it keeps the item's graph as
      // it is, with no copy (a GeOp body is most of the graph).
      return tensorflow::errors::Aborted("NpuOptimizer: ", item.id,
                                         " was rewritten with the graph that calls it");
    }
    Status status = CallEntry(item, optimized_graph);
    if (tensorflow::errors::IsAborted(status)) return status;  // unchanged: Grappler keeps the graph
    if (!status.ok()) {
      FailingGraph(item,
                   "NpuOptimizer could not rewrite this graph, so it is not run "
                   "(the details are in the log above). " +
                       std::string(status.message()),
                   optimized_graph);
    }
    return Status();
  }

 private:
  // True for a function item (it has _Arg or _Retval nodes) whose other nodes all carry the stamp
  // and none the options digest (the entry checks a digest against the config).
  static bool CoveredByCaller(const GraphDef& graph) {
    bool function_item = false;
    for (const auto& node : graph.node()) {
      const std::string& op = node.op();
      if (op == "_Arg" || op == "_Retval") {
        function_item = true;
        continue;
      }
      if (op == "_DeviceArg" || op == "_DeviceRetval") continue;
      if (!node.attr().contains(kSeenAttr) || node.attr().contains(kOptionsAttr)) {
        return false;
      }
    }
    return function_item;
  }

  Status CallEntry(const GrapplerItem& item, GraphDef* optimized_graph) {
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
      // The library handle lives as long as the Python side keeps it; what it points to, only
      // until the call returns.
      auto* graph = new GraphHandle;
      graph->graph = &item.graph;
      PyRef handle(PyCapsule_New(graph, kGraphHandleName, FreeGraphHandle));
      if (!handle) {
        delete graph;
        return tensorflow::errors::Internal("NpuOptimizer: cannot build the call arguments: ",
                                            FetchPythonError());
      }
      struct Expire {
        GraphHandle* graph;
        ~Expire() { graph->graph = nullptr; }
      } expire{graph};
      PyRef graph_arg(ToPyBytes(graph_bytes));
      if (!graph_arg) {
        return tensorflow::errors::Internal("NpuOptimizer: cannot build the call arguments: ",
                                            FetchPythonError());
      }
      Py_INCREF(graph_arg.get());  // one reference for the argument tuple, one kept here
      PyRef args(Py_BuildValue("(NNNNNNN)",
                               PyUnicode_FromStringAndSize(
                                   item.id.data(),
                                   static_cast<Py_ssize_t>(item.id.size())),
                               graph_arg.get(), ToPyList(item.fetch),
                               ToPyList(feed), ToPyList(preserve),
                               ToPyBytes(config_bytes_), NodeColumns(handle.get())));
      if (!args) {
        return tensorflow::errors::Internal(
            "NpuOptimizer: cannot build the call arguments: ",
            FetchPythonError());
      }
      PyRef returned(PyObject_CallObject(function.get(), args.get()));
      if (!returned && PyErr_ExceptionMatches(PyExc_KeyboardInterrupt)) {
        // Ctrl-C: the run fails with this message (raising the interrupt again
        // would land inside TensorFlow's own error handling).
        PyErr_Clear();
        return tensorflow::errors::Cancelled(
            "NpuOptimizer: interrupted (KeyboardInterrupt) while rewriting "
            "graph ",
            item.id);
      }
      if (!returned) {
        return tensorflow::errors::Internal("NpuOptimizer: ", kEntryModule,
                                            ".", kEntryFunction, " failed: ",
                                            FetchPythonError());
      }
      if (returned.get() == graph_arg.get()) {
        // The entry handed the graph back as it came (nothing new, or already an error graph):
        // Grappler's "changed nothing", which keeps the item's graph without parsing a copy.
        return tensorflow::errors::Aborted("NpuOptimizer: ", item.id, " holds nothing new");
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

  std::string name_;
  std::string config_bytes_;
};

// The real name, then misspellings seen in migrated scripts: the entry answers each of those with an
// error naming the right name.
constexpr const char* kRegisteredNames[] = {
    "NpuOptimizer", "NPUOptimizer", "npuoptimizer",  "NPUOPTIMIZER", "Npuoptimizer",
    "NpuOptimiser", "NPUOptimiser", "npu_optimizer", "NPU_Optimizer"};

struct Registrations {
  Registrations() {
    for (const char* name : kRegisteredNames) {
      const std::string registered(name);
      tensorflow::grappler::CustomGraphOptimizerRegistry::RegisterOptimizerOrDie(
          [registered]() { return new NpuOptimizer(registered); }, registered);
    }
  }
};
const Registrations registrations;

class UnrewrittenGraphCheck : public tensorflow::GraphOptimizationPass {
 public:
  Status Run(const tensorflow::GraphOptimizationPassOptions& options) override {
    if (options.session_options == nullptr || options.graph == nullptr ||
        *options.graph == nullptr || options.is_function_graph) {
      return Status();
    }
    // Names that mean the NpuOptimizer, spelled right or not: any holding "npu" in any case.
    std::string named;
    const auto& rewrite =
        options.session_options->config.graph_options().rewrite_options();
    for (const auto& custom : rewrite.custom_optimizers()) {
      std::string lower = custom.name();
      for (char& c : lower) c = static_cast<char>(std::tolower(c));
      if (lower.find("npu") != std::string::npos) {
        named += (named.empty() ? "" : ", ") + custom.name();
      }
    }
    if (named.empty()) return Status();
    for (const tensorflow::Node* node : (*options.graph)->nodes()) {
      if (node->attrs().Find(kSeenAttr) != nullptr ||
          node->name().rfind(kErrorScope, 0) == 0) {
        return Status();
      }
    }
    return tensorflow::errors::FailedPrecondition(
        "NpuOptimizer: this Session's config names the custom optimizer ",
        named,
        ", but no NpuOptimizer rewrote the graph, which would run "
        "unrewritten. Grappler ignores a name nobody registered (the name is "
        "case-sensitive: NpuOptimizer), skips graphs with fewer nodes than "
        "rewrite_options.min_graph_nodes (4 by default) and every optimizer "
        "when disable_meta_optimizer is set: spell it NpuOptimizer, set "
        "config.graph_options.rewrite_options.min_graph_nodes = -1 "
        "(npu_config_proto does), or remove it from the config to run the "
        "plain graph");
  }
};

REGISTER_OPTIMIZATION(tensorflow::OptimizationPassRegistry::POST_REWRITE_FOR_EXEC,
                      50, UnrewrittenGraphCheck);

}  // namespace
}  // namespace npu_sim_bridge


// ------------------------------------------------------------------------------------------------
// Kernels Python calls through ctypes (native/build.py shim_function), holding the GIL. Each has a
// Python twin that gives the same answer where the shim is not loaded; tests compare the two.

namespace npu_sim_bridge {
namespace {

constexpr int64_t kInf = INT64_MAX;  // float("inf") on the Python side

// A Python list of ints -> vector; false with a Python error set.
bool ToInts(PyObject* list, std::vector<int64_t>* out) {
  PyRef items(PySequence_Fast(list, "expected a list of ints"));
  if (!items) return false;
  const Py_ssize_t count = PySequence_Fast_GET_SIZE(items.get());
  out->resize(static_cast<size_t>(count));
  for (Py_ssize_t i = 0; i < count; ++i) {
    (*out)[i] = PyLong_AsLongLong(PySequence_Fast_GET_ITEM(items.get(), i));
    if ((*out)[i] == -1 && PyErr_Occurred()) return false;
  }
  return true;
}

// A bytes-like object (one byte per value, as a bytearray of flags) or a list of ints -> vector: a
// bytearray read as it lies, with no list of int objects made for it.
bool ToFlags(PyObject* values, std::vector<int64_t>* out) {
  if (!PyObject_CheckBuffer(values)) return ToInts(values, out);
  Py_buffer view;
  if (PyObject_GetBuffer(values, &view, PyBUF_SIMPLE) != 0) return false;
  const auto* bytes = static_cast<const unsigned char*>(view.buf);
  out->assign(bytes, bytes + view.len);
  PyBuffer_Release(&view);
  return true;
}

// An int32 buffer (array('i')) -> its values; false with a Python error set.
bool ToInt32s(PyObject* values, std::vector<int64_t>* out) {
  Py_buffer view;
  if (PyObject_GetBuffer(values, &view, PyBUF_FORMAT | PyBUF_C_CONTIGUOUS) != 0) return false;
  const bool int32 = view.itemsize == 4 && view.format != nullptr && (std::string(view.format) == "i" ||
                                                                      std::string(view.format) == "=i");
  if (int32) {
    const auto* ints = static_cast<const int32_t*>(view.buf);
    out->assign(ints, ints + view.len / 4);
  }
  PyBuffer_Release(&view);
  if (!int32) PyErr_SetString(PyExc_TypeError, "expected an int32 buffer (array('i'))");
  return int32;
}

// Lists of ints -> vectors: a list of lists, or the lists in one piece as a pair of int32 buffers
// (starts, values), list i being values[starts[i]:starts[i + 1]] (no Python object per list).
bool ToIntLists(PyObject* lists, std::vector<std::vector<int64_t>>* out) {
  if (PyTuple_Check(lists) && PyTuple_GET_SIZE(lists) == 2 && PyObject_CheckBuffer(PyTuple_GET_ITEM(lists, 0)) &&
      PyObject_CheckBuffer(PyTuple_GET_ITEM(lists, 1))) {
    std::vector<int64_t> starts, values;
    if (!ToInt32s(PyTuple_GET_ITEM(lists, 0), &starts) || !ToInt32s(PyTuple_GET_ITEM(lists, 1), &values)) {
      return false;
    }
    bool shaped = !starts.empty() && starts.front() == 0 && starts.back() == static_cast<int64_t>(values.size());
    for (size_t i = 1; shaped && i < starts.size(); ++i) shaped = starts[i - 1] <= starts[i];
    if (!shaped) {
      PyErr_SetString(PyExc_ValueError, "lists in one piece: starts must run from 0 to the values' length");
      return false;
    }
    out->resize(starts.size() - 1);
    for (size_t i = 0; i + 1 < starts.size(); ++i) {
      (*out)[i].assign(values.begin() + starts[i], values.begin() + starts[i + 1]);
    }
    return true;
  }
  PyRef items(PySequence_Fast(lists, "expected a list of lists of ints"));
  if (!items) return false;
  const Py_ssize_t count = PySequence_Fast_GET_SIZE(items.get());
  out->resize(static_cast<size_t>(count));
  for (Py_ssize_t i = 0; i < count; ++i) {
    if (!ToInts(PySequence_Fast_GET_ITEM(items.get(), i), &(*out)[i])) return false;
  }
  return true;
}

// The bytes of `values` as they lie in memory: what Python's array.array takes (typecode i or f).
template <typename T>
PyObject* ToBytes(const std::vector<T>& values) {
  return PyBytes_FromStringAndSize(reinterpret_cast<const char*>(values.data()),
                                   static_cast<Py_ssize_t>(values.size() * sizeof(T)));
}

size_t FindRoot(std::vector<size_t>* parent, size_t unit) {
  auto& up = *parent;
  while (up[unit] != unit) {
    up[unit] = up[up[unit]];
    unit = up[unit];
  }
  return unit;
}

}  // namespace
}  // namespace npu_sim_bridge

// The node columns NodeColumns hands over with a Grappler item, of a serialized GraphDef: what
// tests compare with the columns read in Python. Its callables stay usable while referenced.
extern "C" __attribute__((visibility("default"))) PyObject* NpuSimColumns(PyObject* args) {
  using npu_sim_bridge::GraphHandle;
  using npu_sim_bridge::PyRef;
  PyObject* bytes = nullptr;
  char* data = nullptr;
  Py_ssize_t size = 0;
  if (!PyArg_ParseTuple(args, "S", &bytes) || PyBytes_AsStringAndSize(bytes, &data, &size) != 0) {
    return nullptr;
  }
  auto graph = std::make_unique<tensorflow::GraphDef>();
  if (!graph->ParseFromArray(data, static_cast<int>(size))) {
    PyErr_SetString(PyExc_ValueError, "NpuSimColumns: the bytes are not a GraphDef");
    return nullptr;
  }
  auto* handle = new GraphHandle;
  handle->graph = graph.get();
  handle->owned = std::move(graph);
  PyRef capsule(PyCapsule_New(handle, npu_sim_bridge::kGraphHandleName, npu_sim_bridge::FreeGraphHandle));
  if (!capsule) {
    delete handle;
    return nullptr;
  }
  return npu_sim_bridge::NodeColumns(capsule.get());
}

// passes/partition/cluster.py _segments_py, over the units of a graph: (order, succ, device), each
// unit's predecessors taken from its sources' successor lists (succ a list of lists, or the lists in
// one piece as (starts, targets), two array('i')); order None for the units' own
// numbering, device a list or a bytearray of flags -> the bytes of (segment_of, the segments'
// members, where each segment starts, layer, reach_device), int32 but reach_device's float32 (a
// layer is below 2**24, so float32 holds every reach exactly, and infinity); cluster.py _segments
// makes them arrays. Layers are ASAP then ALAP
// over `order`; device units joined by an edge within one layer form a segment; segments come in the
// order of their first member. nullptr with a Python error set for arguments of the wrong shape.
extern "C" __attribute__((visibility("default"))) PyObject* NpuSimSegments(PyObject* args) {
  using npu_sim_bridge::kInf;
  using npu_sim_bridge::PyRef;
  PyObject *order_arg, *succ_arg, *device_arg;
  if (!PyArg_ParseTuple(args, "OOO", &order_arg, &succ_arg, &device_arg)) return nullptr;
  std::vector<int64_t> order, device;
  std::vector<std::vector<int64_t>> succ;
  if ((order_arg != Py_None && !npu_sim_bridge::ToInts(order_arg, &order)) ||
      !npu_sim_bridge::ToIntLists(succ_arg, &succ) || !npu_sim_bridge::ToFlags(device_arg, &device)) {
    return nullptr;
  }
  const size_t count = succ.size();
  if (order_arg == Py_None) {  // the numbering is the order (no list of int objects made for it)
    order.resize(count);
    for (size_t unit = 0; unit < count; ++unit) order[unit] = static_cast<int64_t>(unit);
  }
  bool shaped = device.size() == count;
  for (int64_t unit : order) shaped = shaped && unit >= 0 && static_cast<size_t>(unit) < count;
  for (const auto& units : succ) {
    for (int64_t unit : units) shaped = shaped && unit >= 0 && static_cast<size_t>(unit) < count;
  }
  if (!shaped) {
    PyErr_SetString(PyExc_ValueError, "NpuSimSegments: units out of range or lists of different lengths");
    return nullptr;
  }
  std::vector<std::vector<int64_t>> pred(count);
  for (size_t source = 0; source < count; ++source) {
    for (int64_t target : succ[source]) pred[target].push_back(static_cast<int64_t>(source));
  }
  // ASAP: a unit's layer is the highest among its sources, plus one after a host source that has a
  // device ancestor when the unit is on the device.
  std::vector<int64_t> layer_asap(count, 0), stepped(count, 0);
  std::vector<char> device_ancestor(count, 0);
  for (int64_t unit : order) {
    const auto& sources = pred[unit];
    if (!sources.empty()) {
      int64_t highest = INT64_MIN;
      if (device[unit]) {
        for (int64_t source : sources) highest = std::max(highest, stepped[source]);
        device_ancestor[unit] = 1;
      } else {
        char any = 0;
        for (int64_t source : sources) {
          highest = std::max(highest, layer_asap[source]);
          any = any || device_ancestor[source];
        }
        device_ancestor[unit] = any;
      }
      layer_asap[unit] = highest;
    } else {
      device_ancestor[unit] = device[unit] ? 1 : 0;
    }
    stepped[unit] = layer_asap[unit] + ((device[unit] || !device_ancestor[unit]) ? 0 : 1);
  }
  // ALAP: as late as the consumers allow.
  std::vector<int64_t> layer(count, 0), reach(count, kInf), reach_device(count, kInf);
  for (auto it = order.rbegin(); it != order.rend(); ++it) {
    const int64_t unit = *it;
    int64_t limit = kInf;
    if (device[unit]) {
      for (int64_t target : succ[unit]) limit = std::min(limit, reach_device[target]);
      layer[unit] = reach[unit] = reach_device[unit] = limit == kInf ? layer_asap[unit] : limit;
    } else {
      for (int64_t target : succ[unit]) limit = std::min(limit, reach[target]);
      reach[unit] = limit;
      reach_device[unit] = limit == kInf ? kInf : limit - 1;
    }
  }
  // Device units joined by an edge within one layer share a segment.
  std::vector<size_t> parent(count);
  for (size_t unit = 0; unit < count; ++unit) parent[unit] = unit;
  for (int64_t unit : order) {
    if (!device[unit]) continue;
    for (int64_t target : succ[unit]) {
      if (!device[target] || layer[target] != layer[unit]) continue;
      const size_t a = npu_sim_bridge::FindRoot(&parent, static_cast<size_t>(unit));
      const size_t b = npu_sim_bridge::FindRoot(&parent, static_cast<size_t>(target));
      if (a != b) parent[std::max(a, b)] = std::min(a, b);
    }
  }
  // Segments in the order of their first member: each device unit's segment (-1 for the others),
  // the members of every segment one after the other, and where each segment starts among them.
  std::vector<int64_t> group_of_root(count, -1), segment_of(count, -1), members, starts{0};
  std::vector<std::vector<int64_t>> segments;
  for (int64_t unit : order) {
    if (!device[unit]) continue;
    const size_t root = npu_sim_bridge::FindRoot(&parent, static_cast<size_t>(unit));
    if (group_of_root[root] < 0) {
      group_of_root[root] = static_cast<int64_t>(segments.size());
      segments.emplace_back();
    }
    segments[group_of_root[root]].push_back(unit);
  }
  for (size_t index = 0; index < segments.size(); ++index) {
    for (int64_t unit : segments[index]) {
      segment_of[unit] = static_cast<int64_t>(index);
      members.push_back(unit);
    }
    starts.push_back(static_cast<int64_t>(members.size()));
  }
  std::vector<float> reaches(count);
  for (size_t unit = 0; unit < count; ++unit) {
    reaches[unit] = reach_device[unit] == kInf ? HUGE_VALF : static_cast<float>(reach_device[unit]);
  }
  const auto narrow = [](const std::vector<int64_t>& values) {
    return std::vector<int32_t>(values.begin(), values.end());
  };
  PyRef units_segment(npu_sim_bridge::ToBytes(narrow(segment_of))),
      all_members(npu_sim_bridge::ToBytes(narrow(members))), segment_starts(npu_sim_bridge::ToBytes(narrow(starts))),
      layers(npu_sim_bridge::ToBytes(narrow(layer))), reach_bytes(npu_sim_bridge::ToBytes(reaches));
  if (!units_segment || !all_members || !segment_starts || !layers || !reach_bytes) return nullptr;
  return PyTuple_Pack(5, units_segment.get(), all_members.get(), segment_starts.get(), layers.get(),
                      reach_bytes.get());
}
