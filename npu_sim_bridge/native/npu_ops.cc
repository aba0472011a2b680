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

#include <cmath>
#include <cstdint>
#include <cstring>

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
    auto* workers = context->device()->tensorflow_cpu_worker_threads()->workers;
    // A cycle or two per value, memory bound: shard only what is worth a thread.
    workers->ParallelFor(size, /*cost_per_unit=*/2, [in, out](int64_t begin, int64_t end) {
      RoundRange(in, out, begin, end);
    });
  }
};

}  // namespace
}  // namespace npu_sim_bridge

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
