// NPU operators that Ascend's adapter registers with TensorFlow and TensorFlow itself lacks.
//
// A script's npu_unary_ops.gelu(x) builds a node of op type "Gelu" (its gradient "GeluGrad"), and
// npu_aicore_ops.fast_gelu(x) one of type "FastGelu" ("FastGeluGrad"), as on the NPU, so the
// operator library in ops_info/ classifies them and the report names them. The kernels compute what
// the Ascend ops compute:
//
//   Gelu(x)              = x / (1 + exp(-k * (x + 0.044715 x^3))),  k = 2 * sqrt(2 / pi)
//                        = 0.5 x (1 + tanh(sqrt(2 / pi) (x + 0.044715 x^3)))
//   GeluGrad(dy, x, y)   = dy * d Gelu(x) / dx
//   FastGelu(x)          = x / (1 + exp(-1.702 |x|)) * exp(0.851 (x - |x|)) = x * sigmoid(1.702 x)
//   FastGeluGrad(dy, x)  = dy * d FastGelu(x) / dx
//
// in float32 arithmetic for half and bfloat16 inputs (the NPU's vector unit widens them too).
//
// NpuSimRoundToFloat16(x) is the simulator's own op, not the adapter's: the float16 emulation's
// rounding (sim_fp16_execution=emulate). It gives, in one memory pass and in place when it may, the
// float32 values that Cast(float32 -> float16) followed by Cast(float16 -> float32) give: round to
// nearest, ties to even, subnormals kept, |x| >= 65520 becomes inf (float16 overflow is real), NaN
// stays NaN (as the quiet NaN that pair gives, sign kept).
//
// NpuSimWriteFileAtomic(filename, contents) is the simulator's own op too: WriteFile as the dump pass
// needs it. It creates the file's folder, writes the bytes to a new hidden file beside the target and
// renames it into place, so a reader sees the whole file or none. When a write fails (a full disk,
// the file size limit, a quota) the hidden file is removed and the op fails with one line naming the
// file and what to do, starting with kWriteErrorPrefix (dump/npy_graph.py's WRITE_ERROR_PREFIX).

#include <fcntl.h>
#include <unistd.h>

#include <atomic>
#include <cerrno>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <string>

#if defined(__x86_64__) || defined(__i386__)
#include <immintrin.h>
#define NPU_SIM_X86 1
#endif

#include "tensorflow/core/framework/common_shape_fns.h"
#include "tensorflow/core/framework/op.h"
#include "tensorflow/core/framework/op_kernel.h"
#include "tensorflow/core/platform/threadpool.h"

namespace npu_sim_bridge {
namespace {

using tensorflow::OpKernel;
using tensorflow::OpKernelConstruction;
using tensorflow::OpKernelContext;
using tensorflow::Tensor;

constexpr float kSqrt2OverPi = 0.7978845608028654f;
constexpr float kCubic = 0.044715f;
constexpr float kFast = 1.702f;

float Inner(float x) { return kSqrt2OverPi * (x + kCubic * x * x * x); }

float GeluValue(float x) { return 0.5f * x * (1.0f + std::tanh(Inner(x))); }

float GeluDerivative(float x) {
  const float t = std::tanh(Inner(x));
  const float d_inner = kSqrt2OverPi * (1.0f + 3.0f * kCubic * x * x);
  return 0.5f * (1.0f + t) + 0.5f * x * (1.0f - t * t) * d_inner;
}

float Sigmoid(float x) { return 1.0f / (1.0f + std::exp(-x)); }

float FastGeluValue(float x) { return x * Sigmoid(kFast * x); }

float FastGeluDerivative(float x) {
  const float s = Sigmoid(kFast * x);
  return s + kFast * x * s * (1.0f - s);
}

// y = F(x), elementwise.
template <typename T, float (*F)(float)>
class UnaryOp : public OpKernel {
 public:
  explicit UnaryOp(OpKernelConstruction* context) : OpKernel(context) {}

  void Compute(OpKernelContext* context) override {
    const Tensor& x = context->input(0);
    Tensor* y = nullptr;
    OP_REQUIRES_OK(context, context->allocate_output(0, x.shape(), &y));
    const auto in = x.flat<T>();
    auto out = y->flat<T>();
    for (int64_t i = 0; i < in.size(); ++i) {
      out(i) = static_cast<T>(F(static_cast<float>(in(i))));
    }
  }
};

// z = dy * F'(x), elementwise (GeluGrad's third input y is not needed for the derivative).
template <typename T, float (*DF)(float)>
class UnaryGradOp : public OpKernel {
 public:
  explicit UnaryGradOp(OpKernelConstruction* context) : OpKernel(context) {}

  void Compute(OpKernelContext* context) override {
    const Tensor& dy = context->input(0);
    const Tensor& x = context->input(1);
    OP_REQUIRES(context, dy.shape() == x.shape(),
                tensorflow::errors::InvalidArgument(name(), ": dy shape ", dy.shape().DebugString(),
                                                    " differs from x shape ", x.shape().DebugString()));
    Tensor* z = nullptr;
    OP_REQUIRES_OK(context, context->allocate_output(0, x.shape(), &z));
    const auto grad = dy.flat<T>();
    const auto in = x.flat<T>();
    auto out = z->flat<T>();
    for (int64_t i = 0; i < in.size(); ++i) {
      out(i) = static_cast<T>(static_cast<float>(grad(i)) * DF(static_cast<float>(in(i))));
    }
  }
};


// ------------------------------------------------------------------------ float16 rounding
// float(half(x)) from x's bits, branch free.
inline uint32_t RoundBitsToFloat16(uint32_t bits) {
  const uint32_t sign = bits & 0x80000000u;
  const uint32_t magnitude = bits ^ sign;
  // Normal float16 range (|x| >= 2^-14): keep 10 mantissa bits, ties to even; a carry may go into
  // the exponent, which is right.
  const uint32_t normal = (magnitude + 0x0fffu + ((magnitude >> 13) & 1u)) & 0xffffe000u;
  // Subnormal range: float16 holds multiples of 2^-24 there, and the float32 ulp of 0.5 is 2^-24, so
  // adding and taking away 0.5 rounds to the nearest multiple, ties to even (both steps are exact but
  // the rounding one).
  float value;
  std::memcpy(&value, &magnitude, sizeof(value));
  const float rounded = (value + 0.5f) - 0.5f;
  uint32_t subnormal;
  std::memcpy(&subnormal, &rounded, sizeof(subnormal));
  uint32_t result = magnitude < 0x38800000u ? subnormal : normal;
  result = result > 0x477fe000u ? 0x7f800000u : result;  // above 65504: inf
  result = magnitude > 0x7f800000u ? 0x7fc00000u : result;  // NaN: the quiet NaN
  return result | sign;
}

// The portable loop (about 1.5 ns a value on x86, where the compiler keeps it scalar); it serves
// machines without F16C.
#ifdef NPU_SIM_X86
__attribute__((target_clones("avx512f", "avx2", "default"), optimize("O3")))
#endif
void RoundRangeBits(const float* in, float* out, int64_t begin, int64_t end) {
  for (int64_t i = begin; i < end; ++i) {
    uint32_t bits;
    std::memcpy(&bits, in + i, sizeof(bits));
    bits = RoundBitsToFloat16(bits);
    std::memcpy(out + i, &bits, sizeof(bits));
  }
}

using RoundRangeFn = void (*)(const float*, float*, int64_t, int64_t);

#ifdef NPU_SIM_X86
// The same values with the CPU's own float16 conversions, eight at a time (about 0.25 ns a value).
// VCVTPS2PH rounds to nearest even, keeps subnormals whatever MXCSR's FTZ/DAZ say (TensorFlow's
// threads set both) and overflows to inf as the Cast does; only a NaN's payload differs, so NaN
// lanes take the quiet NaN the Cast pair gives.
// Lanes without a NaN (nearly always all of them) skip the blend.
__attribute__((target("avx,f16c")))
void RoundRangeF16c(const float* in, float* out, int64_t begin, int64_t end) {
  const __m256 sign_bit = _mm256_castsi256_ps(_mm256_set1_epi32(static_cast<int>(0x80000000u)));
  const __m256 quiet_nan = _mm256_castsi256_ps(_mm256_set1_epi32(0x7fc00000));
  int64_t i = begin;
  for (; i + 8 <= end; i += 8) {
    const __m256 x = _mm256_loadu_ps(in + i);
    __m256 rounded = _mm256_cvtph_ps(_mm256_cvtps_ph(x, _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC));
    const __m256 is_nan = _mm256_cmp_ps(x, x, _CMP_UNORD_Q);
    if (_mm256_movemask_ps(is_nan)) {
      const __m256 nan = _mm256_or_ps(_mm256_and_ps(x, sign_bit), quiet_nan);
      rounded = _mm256_blendv_ps(rounded, nan, is_nan);
    }
    _mm256_storeu_ps(out + i, rounded);
  }
  RoundRangeBits(in, out, i, end);
}

// The same with AVX-512's conversions, sixteen at a time; the tail goes to the eight-wide loop.
__attribute__((target("avx512f,avx,f16c")))
void RoundRangeAvx512(const float* in, float* out, int64_t begin, int64_t end) {
  const __m512i sign_bit = _mm512_set1_epi32(static_cast<int>(0x80000000u));
  const __m512i quiet_nan = _mm512_set1_epi32(0x7fc00000);
  int64_t i = begin;
  for (; i + 16 <= end; i += 16) {
    const __m512 x = _mm512_loadu_ps(in + i);
    __m512 rounded = _mm512_cvtph_ps(_mm512_cvtps_ph(x, _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC));
    const __mmask16 is_nan = _mm512_cmp_ps_mask(x, x, _CMP_UNORD_Q);
    if (is_nan) {
      const __m512i nan = _mm512_or_si512(_mm512_and_si512(_mm512_castps_si512(x), sign_bit), quiet_nan);
      rounded = _mm512_mask_blend_ps(is_nan, rounded, _mm512_castsi512_ps(nan));
    }
    _mm512_storeu_ps(out + i, rounded);
  }
  RoundRangeF16c(in, out, i, end);
}

RoundRangeFn PickRoundRange() {
  __builtin_cpu_init();
  if (!__builtin_cpu_supports("avx") || !__builtin_cpu_supports("f16c")) return RoundRangeBits;
  return __builtin_cpu_supports("avx512f") ? RoundRangeAvx512 : RoundRangeF16c;
}

#else
RoundRangeFn PickRoundRange() { return RoundRangeBits; }
#endif

const RoundRangeFn RoundRange = PickRoundRange();

class RoundToFloat16Op : public OpKernel {
 public:
  explicit RoundToFloat16Op(OpKernelConstruction* context) : OpKernel(context) {}

  void Compute(OpKernelContext* context) override {
    const Tensor& x = context->input(0);
    Tensor* y = nullptr;
    // The round trip is usually its input's only reader: then it rounds that buffer in place.
    OP_REQUIRES_OK(context, context->forward_input_or_allocate_output({0}, 0, x.shape(), &y));
    const float* in = x.flat<float>().data();
    float* out = y->flat<float>().data();
    const int64_t size = x.NumElements();
    // A tensor of a small model's step (most of them) rounds in a few tens of microseconds on this
    // thread. Sharded, the kernel would wait for a worker of the pool, which the step's other
    // kernels keep busy: on a loaded machine that wait is the kernel's cost, not the pass.
    if (size < kRoundInline) {
      RoundRange(in, out, 0, size);
      return;
    }
    auto* workers = context->device()->tensorflow_cpu_worker_threads()->workers;
    // A cycle or two per value, memory bound: shard only what is worth a thread.
    workers->ParallelFor(size, /*cost_per_unit=*/2, [in, out](int64_t begin, int64_t end) {
      RoundRange(in, out, begin, end);
    });
  }

 private:
  static constexpr int64_t kRoundInline = int64_t{1} << 18;  // values (1 MiB of float32)
};


// ------------------------------------------------------------------------ atomic file writes
constexpr char kWriteErrorPrefix[] = "npu-sim dump: cannot write ";

std::string ParentOf(const std::string& path) {
  const size_t slash = path.rfind('/');
  if (slash == std::string::npos) return "";
  return slash == 0 ? "/" : path.substr(0, slash);
}

// What to do about an errno of a failed create or write, in words.
std::string Advice(int error, const std::string& folder) {
  const std::string where = folder.empty() ? "the current folder" : folder;
  switch (error) {
    case ENOSPC:
      return "the disk holding " + where + " is full; free space there or set dump_path to a folder on a disk "
             "with room";
    case EDQUOT:
      return "the disk quota of " + where + " is used up; free space there or set dump_path to another folder";
    case EFBIG:
      return "the file is over the size limit of this process (ulimit -f); raise the limit or dump fewer steps "
             "(dump_step)";
    case EACCES:
    case EPERM:
    case EROFS:
      return where + " cannot be written; set dump_path to a folder you can write";
    default:
      return "check " + where + " and set dump_path to a folder you can write";
  }
}

tensorflow::Status WriteFailure(const std::string& path, const std::string& what, int error,
                                const std::string& reason = "") {
  const std::string message = std::string(kWriteErrorPrefix) + path + " (" + what + ": " +
                              (reason.empty() ? std::string(std::strerror(error)) : reason) + "): " +
                              Advice(error, ParentOf(path)) + "; no partial file was left";
  if (error == ENOSPC || error == EDQUOT || error == EFBIG) return tensorflow::errors::ResourceExhausted(message);
  if (error == EACCES || error == EPERM || error == EROFS) return tensorflow::errors::PermissionDenied(message);
  return tensorflow::errors::Unknown(message);
}

std::atomic<uint64_t> partial_count{0};

// Writes `contents` to `path` through a hidden file in the same folder and a rename.
tensorflow::Status WriteAtomically(tensorflow::Env* env, const std::string& path, const std::string& contents) {
  const std::string folder = ParentOf(path);
  if (!folder.empty()) {
    const tensorflow::Status made = env->RecursivelyCreateDir(folder);
    if (!made.ok() && made.code() != tensorflow::error::ALREADY_EXISTS) {
      const int error = made.code() == tensorflow::error::PERMISSION_DENIED ? EACCES : EIO;
      return WriteFailure(path, "creating its folder failed", error, std::string(made.message()));
    }
  }
  const size_t slash = path.rfind('/');
  const std::string base = slash == std::string::npos ? path : path.substr(slash + 1);
  const std::string prefix = folder.empty() ? "" : (folder == "/" ? "/" : folder + "/");
  std::string partial;
  int fd = -1;
  for (int attempt = 0; fd < 0; ++attempt) {
    partial = prefix + "." + base + ".partial-" + std::to_string(getpid()) + "-" +
              std::to_string(partial_count.fetch_add(1));
    fd = open(partial.c_str(), O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0666);
    if (fd < 0 && (errno != EEXIST || attempt > 100)) return WriteFailure(path, "creating it failed", errno);
  }
  const char* data = contents.data();
  size_t left = contents.size();
  while (left > 0) {
    const ssize_t written = write(fd, data, left);
    if (written < 0 && errno == EINTR) continue;
    if (written <= 0) {
      const int error = written < 0 ? errno : EIO;
      close(fd);
      unlink(partial.c_str());
      return WriteFailure(path, "writing it failed", error);
    }
    data += written;
    left -= static_cast<size_t>(written);
  }
  if (close(fd) != 0) {  // a network or delayed-allocation file system reports ENOSPC here
    const int error = errno;
    unlink(partial.c_str());
    return WriteFailure(path, "closing it failed", error);
  }
  if (rename(partial.c_str(), path.c_str()) != 0) {
    const int error = errno;
    unlink(partial.c_str());
    return WriteFailure(path, "renaming it into place failed", error);
  }
  return tensorflow::OkStatus();
}

class WriteFileAtomicOp : public OpKernel {
 public:
  explicit WriteFileAtomicOp(OpKernelConstruction* context) : OpKernel(context) {}

  void Compute(OpKernelContext* context) override {
    const Tensor& filename = context->input(0);
    const Tensor& contents = context->input(1);
    OP_REQUIRES(context, tensorflow::TensorShapeUtils::IsScalar(filename.shape()),
                tensorflow::errors::InvalidArgument(name(), ": filename must be a scalar, got shape ",
                                                    filename.shape().DebugString()));
    OP_REQUIRES(context, tensorflow::TensorShapeUtils::IsScalar(contents.shape()),
                tensorflow::errors::InvalidArgument(name(), ": contents must be a scalar, got shape ",
                                                    contents.shape().DebugString()));
    const std::string path(filename.scalar<tensorflow::tstring>()());
    const std::string bytes(contents.scalar<tensorflow::tstring>()());
    OP_REQUIRES_OK(context, WriteAtomically(context->env(), path, bytes));
  }
};

}  // namespace
}  // namespace npu_sim_bridge

REGISTER_OP("NpuSimWriteFileAtomic")
    .Input("filename: string")
    .Input("contents: string")
    .SetIsStateful()
    .SetShapeFn(tensorflow::shape_inference::NoOutputs);

REGISTER_KERNEL_BUILDER(Name("NpuSimWriteFileAtomic").Device(tensorflow::DEVICE_CPU),
                        npu_sim_bridge::WriteFileAtomicOp);

REGISTER_OP("Gelu")
    .Input("x: T")
    .Output("y: T")
    .Attr("T: {half, bfloat16, float, double}")
    .SetShapeFn(tensorflow::shape_inference::UnchangedShape);

REGISTER_OP("GeluGrad")
    .Input("dy: T")
    .Input("x: T")
    .Input("y: T")
    .Output("z: T")
    .Attr("T: {half, bfloat16, float, double}")
    .SetShapeFn(tensorflow::shape_inference::UnchangedShape);

REGISTER_OP("FastGelu")
    .Input("x: T")
    .Output("y: T")
    .Attr("T: {half, bfloat16, float, double}")
    .SetShapeFn(tensorflow::shape_inference::UnchangedShape);

REGISTER_OP("FastGeluGrad")
    .Input("dy: T")
    .Input("x: T")
    .Output("z: T")
    .Attr("T: {half, bfloat16, float, double}")
    .SetShapeFn(tensorflow::shape_inference::UnchangedShape);

#define NPU_SIM_REGISTER(type)                                                                          \
  REGISTER_KERNEL_BUILDER(Name("Gelu").Device(tensorflow::DEVICE_CPU).TypeConstraint<type>("T"),          \
                          npu_sim_bridge::UnaryOp<type, npu_sim_bridge::GeluValue>);                      \
  REGISTER_KERNEL_BUILDER(Name("GeluGrad").Device(tensorflow::DEVICE_CPU).TypeConstraint<type>("T"),      \
                          npu_sim_bridge::UnaryGradOp<type, npu_sim_bridge::GeluDerivative>);             \
  REGISTER_KERNEL_BUILDER(Name("FastGelu").Device(tensorflow::DEVICE_CPU).TypeConstraint<type>("T"),      \
                          npu_sim_bridge::UnaryOp<type, npu_sim_bridge::FastGeluValue>);                  \
  REGISTER_KERNEL_BUILDER(Name("FastGeluGrad").Device(tensorflow::DEVICE_CPU).TypeConstraint<type>("T"),  \
                          npu_sim_bridge::UnaryGradOp<type, npu_sim_bridge::FastGeluDerivative>);

NPU_SIM_REGISTER(Eigen::half)
NPU_SIM_REGISTER(Eigen::bfloat16)
NPU_SIM_REGISTER(float)
NPU_SIM_REGISTER(double)

REGISTER_OP("NpuSimRoundToFloat16")
    .Input("x: float")
    .Output("y: float")
    .SetShapeFn(tensorflow::shape_inference::UnchangedShape);

REGISTER_KERNEL_BUILDER(Name("NpuSimRoundToFloat16").Device(tensorflow::DEVICE_CPU),
                        npu_sim_bridge::RoundToFloat16Op);
