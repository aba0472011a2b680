"""The float16 rounding kernel's two loops against each other, on every float32 bit pattern.

NpuSimRoundToFloat16 (npu_sim_bridge/native/npu_ops.cc) rounds with AVX-512's float16 conversions
where the CPU has them, else with F16C's, and with a portable bit-twiddling loop elsewhere. The test suite checks the kernel
against TensorFlow's Cast round trip on hard cases and a sample of every bit pattern; this script
compiles a small harness around the op library's source and checks, for all 2^32 patterns, that the
F16C loop and (where the CPU has AVX-512) the AVX-512 loop give the portable loop's bits, with MXCSR's flush-to-zero and denormals-are-zero off and
on (TensorFlow's threads run with both on). It also prints each loop's time per value over all the
patterns; subnormals and NaNs are a large share of them and slow the CPU's conversions down, so
tensors of ordinary values round faster than that (bench_speed.py measures them in a training step).

Run:  python benchmarks/check_round_kernel.py [--stride N]   (x86 with F16C; about a minute)
"""

from __future__ import annotations

import argparse
import os
import platform
import subprocess
import sys
import tempfile

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), ".."))

from npu_sim_bridge.native import build  # noqa: E402

HARNESS = r"""
#include "%(source)s"

#include <chrono>
#include <cstdio>
#include <vector>

int main(int argc, char** argv) {
  using namespace npu_sim_bridge;
  const uint64_t stride = argc > 1 ? std::strtoull(argv[1], nullptr, 10) : 1;
  if (!__builtin_cpu_supports("avx") || !__builtin_cpu_supports("f16c")) {
    std::printf("this CPU has no F16C: the kernel uses the portable loop only\n");
    return 2;
  }
  const int64_t chunk = 1 << 16;  // 256 KiB a buffer: in cache, so the times are the loops' own
  std::vector<uint32_t> bits(chunk);
  std::vector<float> fast(chunk), wide(chunk), portable(chunk);
  const bool has_avx512 = __builtin_cpu_supports("avx512f");
  int failures = 0;
  for (int flush = 0; flush < 2; ++flush) {
    const unsigned int saved = _mm_getcsr();
    if (flush) _mm_setcsr(saved | 0x8040u);  // FTZ | DAZ
    uint64_t checked = 0, differ = 0;
    double fast_s = 0, wide_s = 0, portable_s = 0;
    for (uint64_t base = 0; base < (1ull << 32); base += chunk * stride) {
      int64_t count = 0;
      for (uint64_t value = base; value < base + chunk * stride && value < (1ull << 32); value += stride)
        bits[count++] = static_cast<uint32_t>(value);
      const float* in = reinterpret_cast<const float*>(bits.data());
      auto start = std::chrono::steady_clock::now();
      RoundRangeF16c(in, fast.data(), 0, count);
      auto middle = std::chrono::steady_clock::now();
      RoundRangeBits(in, portable.data(), 0, count);
      auto end = std::chrono::steady_clock::now();
      if (has_avx512) RoundRangeAvx512(in, wide.data(), 0, count);
      auto last = std::chrono::steady_clock::now();
      fast_s += std::chrono::duration<double>(middle - start).count();
      portable_s += std::chrono::duration<double>(end - middle).count();
      wide_s += std::chrono::duration<double>(last - end).count();
      for (int64_t i = 0; i < count; ++i) {
        uint32_t a, b, c;
        std::memcpy(&a, &fast[i], 4);
        std::memcpy(&b, &portable[i], 4);
        std::memcpy(&c, &wide[i], 4);
        if (a != b && differ++ < 5)
          std::printf("  x=%%08x: F16C %%08x, portable %%08x\n", bits[i], a, b);
        if (has_avx512 && c != b && differ++ < 5)
          std::printf("  x=%%08x: AVX-512 %%08x, portable %%08x\n", bits[i], c, b);
      }
      checked += count;
    }
    _mm_setcsr(saved);
    std::printf("FTZ/DAZ %%s: %%llu patterns, %%llu differ; F16C %%.2f ns/value, AVX-512 %%s, portable %%.2f ns/value\n",
                flush ? "on " : "off", (unsigned long long)checked, (unsigned long long)differ,
                1e9 * fast_s / checked, has_avx512 ? std::to_string(1e9 * wide_s / checked).substr(0, 4).c_str() : "(not on this CPU)",
                1e9 * portable_s / checked);
    failures += differ != 0;
  }
  return failures ? 1 : 0;
}
"""


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--stride", type=int, default=1, help="check every Nth pattern (default 1: all)")
    args = parser.parse_args()
    if platform.machine().lower() not in ("x86_64", "amd64", "i386", "i686"):
        print(f"{platform.machine()}: the kernel has no F16C loop here, nothing to compare")
        return 0
    compile_flags, link_flags = build._build_flags()
    with tempfile.TemporaryDirectory() as directory:
        harness = os.path.join(directory, "harness.cc")
        with open(harness, "w", encoding="utf-8") as handle:
            handle.write(HARNESS % {"source": build.OPS_SOURCE})
        program = os.path.join(directory, "harness")
        command = [build._compiler(), "-O2", *compile_flags, harness, "-o", program, *link_flags]
        compiled = subprocess.run(command, capture_output=True, text=True, check=False)
        if compiled.returncode:
            print("compiling the harness failed:\n" + compiled.stderr[-3000:], file=sys.stderr)
            return 1
        library_dirs = [flag[2:] for flag in link_flags if flag.startswith("-L")]
        search = os.pathsep.join(library_dirs + [os.environ.get("LD_LIBRARY_PATH", "")])
        env = dict(os.environ, LD_LIBRARY_PATH=search)
        return subprocess.run([program, str(args.stride)], env=env, check=False).returncode


if __name__ == "__main__":
    sys.exit(main())
