// NpuSimGeOp: a GeOp's call, run as one function on the call's own device.
//
// The partition pass outlines each device segment into a FunctionDef. A PartitionedCall would run it
// as a multi-device function: TensorFlow turns the body into a graph, places every node, partitions
// the graph by device, turns each part back into a function and instantiates that. A GeOp's body
// is one segment of one device, so this op skips the placer and the partitioning: at its first run
// it builds the body's graph, assigns every node to the call's device, runs the same
// post-partitioning passes TensorFlow runs on a function's parts (oneDNN's layout rewrite on a
// CPU, so the body runs the kernels the PartitionedCall ran, bit for bit), and instantiates the
// result as a single-device function; every run then calls it.
//
// Grappler's function optimizer and the graph-level function inlining leave the op alone (it is not
// a function call to them), so they no longer build each body before reading `_noinline`.
// The op is stateful: nothing folds, merges or prunes a GeOp.

#include <memory>
#include <string>
#include <unordered_map>
#include <vector>

#include "absl/container/flat_hash_map.h"
#include "tensorflow/core/common_runtime/device.h"
#include "tensorflow/core/common_runtime/optimization_registry.h"
#include "tensorflow/core/framework/function.h"
#include "tensorflow/core/framework/graph_to_functiondef.h"
#include "tensorflow/core/framework/op.h"
#include "tensorflow/core/framework/op_kernel.h"
#include "tensorflow/core/framework/resource_mgr.h"
#include "tensorflow/core/graph/graph.h"
#include "tensorflow/core/platform/mutex.h"
#include "tensorflow/core/public/session_options.h"

namespace npu_sim_bridge {
namespace {

namespace tf = ::tensorflow;

REGISTER_OP("NpuSimGeOp")
    .Input("args: Tin")
    .Output("output: Tout")
    .Attr("Tin: list(type) >= 0")
    .Attr("Tout: list(type) >= 0")
    .Attr("f: func")
    .SetIsStateful()
    .SetShapeFn(tf::shape_inference::UnknownShape)
    .Doc("A GeOp: runs function f on this node's device, as one single-device function.");

// One instantiated body per function library runtime (one per device and executor).
struct Instance {
  std::unique_ptr<tf::FunctionLibraryDefinition> library;  // the graph's library plus the prepared body
  tf::FunctionLibraryRuntime::Handle handle = tf::kInvalidHandle;
};

class GeOpKernel : public tf::AsyncOpKernel {
 public:
  explicit GeOpKernel(tf::OpKernelConstruction* ctx) : tf::AsyncOpKernel(ctx) {
    OP_REQUIRES_OK(ctx, ctx->GetAttr("f", &function_));
  }

  void ComputeAsync(tf::OpKernelContext* ctx, DoneCallback done) override {
    tf::FunctionLibraryRuntime* runtime = ctx->function_library();
    OP_REQUIRES_ASYNC(ctx, runtime != nullptr,
                      tf::errors::Internal("GeOp ", name(), " has no function library to run ",
                                           function_.name(), " with"),
                      done);
    tf::FunctionLibraryRuntime::Handle handle;
    OP_REQUIRES_OK_ASYNC(ctx, Prepare(runtime, &handle), done);

    std::vector<tf::Tensor> args;
    args.reserve(ctx->num_inputs());
    for (int i = 0; i < ctx->num_inputs(); ++i) args.push_back(ctx->input(i));

    tf::FunctionLibraryRuntime::Options options(ctx->step_id());
    tf::ResourceMgr* resources = runtime->device()->resource_manager();
    auto* step_container = new tf::ScopedStepContainer(
        ctx->step_id(), [resources](const std::string& container) { resources->Cleanup(container).IgnoreError(); });
    options.step_container = step_container;
    options.cancellation_manager = ctx->cancellation_manager();
    options.stats_collector = ctx->stats_collector();
    options.collective_executor = ctx->collective_executor();
    options.runner = ctx->runner();
    options.run_all_kernels_inline = ctx->run_all_kernels_inline();
    options.source_device = runtime->device()->name();
    options.allow_dead_tensors = true;
    options.rendezvous = ctx->rendezvous();

    auto* results = new std::vector<tf::Tensor>;
    runtime->Run(options, handle, args, results,
                 [ctx, done = std::move(done), results, step_container](const tf::Status& status) {
                   if (!status.ok()) {
                     ctx->SetStatus(status);
                   } else if (static_cast<int>(results->size()) != ctx->num_outputs()) {
                     ctx->SetStatus(tf::errors::Internal("GeOp body returned ", results->size(),
                                                         " values, the call has ", ctx->num_outputs(),
                                                         " outputs"));
                   } else {
                     for (int i = 0; i < ctx->num_outputs(); ++i) ctx->set_output(i, (*results)[i]);
                   }
                   delete results;
                   delete step_container;
                   done();
                 });
  }

 private:
  // The body's handle on `runtime`, instantiated at the first call.
  tf::Status Prepare(tf::FunctionLibraryRuntime* runtime, tf::FunctionLibraryRuntime::Handle* handle) {
    tf::mutex_lock lock(mu_);
    Instance& instance = instances_[runtime];
    if (instance.handle == tf::kInvalidHandle) TF_RETURN_IF_ERROR(Instantiate(runtime, &instance));
    *handle = instance.handle;
    return tf::OkStatus();
  }

  tf::Status Instantiate(tf::FunctionLibraryRuntime* runtime, Instance* instance) {
    const tf::FunctionLibraryDefinition* graph_library = runtime->GetFunctionLibraryDefinition();
    const tf::FunctionDef* body = graph_library->Find(function_.name());
    if (body == nullptr) {
      return tf::errors::NotFound("GeOp ", name(), " calls ", function_.name(),
                                  ", which is not in the graph's function library");
    }
    std::unique_ptr<tf::Graph> graph;
    std::vector<tf::Node*> arg_nodes, ret_nodes;
    std::vector<std::string> ret_names, control_ret_names;
    tf::DataTypeVector ret_types;
    TF_RETURN_IF_ERROR(tf::GetGraphAndArgRets(function_.name(), tf::AttrSlice(&function_.attr()), body,
                                              graph_library, &graph, &arg_nodes, &ret_nodes, &ret_names,
                                              &ret_types, &control_ret_names));
    // The body's nodes keep the devices the Session placed them on: the call's, a CPU here.
    const std::string& device = runtime->device()->name();

    // The passes TensorFlow runs on each part of a partitioned function, on the one part here.
    instance->library = std::make_unique<tf::FunctionLibraryDefinition>(*graph_library);
    std::unordered_map<std::string, std::unique_ptr<tf::Graph>> parts;
    parts[device] = std::move(graph);
    tf::SessionOptions session_options;
    tf::GraphOptimizationPassOptions pass_options;
    pass_options.session_options = &session_options;
    pass_options.flib_def = instance->library.get();
    pass_options.partition_graphs = &parts;
    pass_options.is_function_graph = true;
    pass_options.default_function_device = static_cast<const tf::Device*>(runtime->device());
    pass_options.function_def = body;
    TF_RETURN_IF_ERROR(tf::OptimizationPassRegistry::Global()->RunGrouping(
        tf::OptimizationPassRegistry::POST_PARTITIONING, pass_options));

    std::unordered_map<std::string, std::string> control_rets;
    for (const std::string& control : control_ret_names) control_rets[control] = control;
    tf::FunctionDef prepared;
    const std::string prepared_name = function_.name() + "_npu_sim_instance";
    TF_RETURN_IF_ERROR(tf::GraphToFunctionDef(
        *parts[device], prepared_name,
        [&control_rets](const tf::Node* node) -> absl::optional<std::string> {
          auto found = control_rets.find(node->name());
          if (found == control_rets.end()) return absl::nullopt;
          return found->second;
        },
        &prepared));
    if (instance->library->Find(prepared_name) != nullptr) {
      TF_RETURN_IF_ERROR(instance->library->RemoveFunction(prepared_name));
    }
    TF_RETURN_IF_ERROR(instance->library->AddFunctionDef(prepared));

    tf::FunctionLibraryRuntime::InstantiateOptions options;
    options.target = device;
    options.lib_def = instance->library.get();
    return runtime->Instantiate(prepared_name, tf::AttrSlice(), options, &instance->handle);
  }

  tf::NameAttrList function_;
  tf::mutex mu_;
  absl::flat_hash_map<tf::FunctionLibraryRuntime*, Instance> instances_ TF_GUARDED_BY(mu_);
};

REGISTER_KERNEL_BUILDER(Name("NpuSimGeOp").Device(tf::DEVICE_CPU), GeOpKernel);

}  // namespace
}  // namespace npu_sim_bridge
