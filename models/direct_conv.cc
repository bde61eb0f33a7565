#include "models/direct_conv.h"

#include <algorithm>
#include <cstring>

#include "models/parallel.h"

#if defined(__AVX512F__) || (defined(__AVX2__) && defined(__FMA__))
#define PSTRAIN_DIRECT_CONV_KERNELS 1
#include <immintrin.h>
#endif

namespace pstrain {

void PadNhwc(const float* in, int64_t batch, int64_t h, int64_t w, int64_t c, int64_t top,
             int64_t left, int64_t out_h, int64_t out_w, float* out) {
  ParallelFor(batch * out_h, 16, [&](int64_t begin, int64_t end) {
    for (int64_t row = begin; row < end; ++row) {
      const int64_t n = row / out_h, y = row % out_h;
      float* dst = out + row * out_w * c;
      const int64_t sy = y - top;
      if (sy < 0 || sy >= h) {
        std::memset(dst, 0, out_w * c * sizeof(float));
        continue;
      }
      std::memset(dst, 0, left * c * sizeof(float));
      std::memcpy(dst + left * c, in + ((n * h + sy) * w) * c, w * c * sizeof(float));
      std::memset(dst + (left + w) * c, 0, (out_w - left - w) * c * sizeof(float));
    }
  });
}

void FlipKernel(const float* kernel, int64_t k, int64_t cin, int64_t cout, float* out) {
  for (int64_t i = 0; i < k; ++i) {
    for (int64_t j = 0; j < k; ++j) {
      const float* src = kernel + ((k - 1 - i) * k + (k - 1 - j)) * cin * cout;
      float* dst = out + (i * k + j) * cout * cin;
      for (int64_t ci = 0; ci < cin; ++ci) {
        for (int64_t co = 0; co < cout; ++co) dst[co * cin + ci] = src[ci * cout + co];
      }
    }
  }
}

#if defined(PSTRAIN_DIRECT_CONV_KERNELS)

namespace {

// One vector register of kLanes floats: AVX-512 (32 registers of 16) or
// AVX2 with FMA (16 registers of 8). The register blocks below are chosen per
// instruction set so the accumulators, the loaded weights or gradients and
// one broadcast fit in the registers.
#if defined(__AVX512F__)
using Vec = __m512;
constexpr int kLanes = 16;
inline Vec Zero() { return _mm512_setzero_ps(); }
inline Vec Load(const float* p) { return _mm512_loadu_ps(p); }
inline Vec Broadcast(float x) { return _mm512_set1_ps(x); }
inline Vec Fma(Vec a, Vec b, Vec c) { return _mm512_fmadd_ps(a, b, c); }
inline void Store(float* p, Vec v) { _mm512_storeu_ps(p, v); }
#else
using Vec = __m256;
constexpr int kLanes = 8;
inline Vec Zero() { return _mm256_setzero_ps(); }
inline Vec Load(const float* p) { return _mm256_loadu_ps(p); }
inline Vec Broadcast(float x) { return _mm256_set1_ps(x); }
inline Vec Fma(Vec a, Vec b, Vec c) { return _mm256_fmadd_ps(a, b, c); }
inline void Store(float* p, Vec v) { _mm256_storeu_ps(p, v); }
#endif

// The most output pixels (forward) or input channels (kernel gradient) one
// register block holds beside V vectors of output channels.
template <int V>
constexpr int kMaxBlock = kLanes == 16 ? 24 / V
                                       : (V == 1   ? 12
                                          : V == 2 ? 6
                                                   : 4);

// P output pixels x (kLanes * V) output channels, accumulated in P * V vector
// registers over every tap and input channel.
template <int V, int P>
inline void MicroKernel(const float* in, int64_t in_row_stride, int64_t cin, const float* kernel,
                        int64_t k, int64_t cout, float* out) {
  Vec acc[P][V];
#pragma GCC unroll 32
  for (int p = 0; p < P; ++p) {
#pragma GCC unroll 4
    for (int v = 0; v < V; ++v) acc[p][v] = Zero();
  }
  for (int64_t i = 0; i < k; ++i) {
    for (int64_t j = 0; j < k; ++j) {
      const float* src = in + i * in_row_stride + j * cin;
      const float* w = kernel + (i * k + j) * cin * cout;
      for (int64_t ci = 0; ci < cin; ++ci) {
        Vec wv[V];
#pragma GCC unroll 4
        for (int v = 0; v < V; ++v) wv[v] = Load(w + ci * cout + kLanes * v);
#pragma GCC unroll 32
        for (int p = 0; p < P; ++p) {
          const Vec b = Broadcast(src[p * cin + ci]);
#pragma GCC unroll 4
          for (int v = 0; v < V; ++v) acc[p][v] = Fma(b, wv[v], acc[p][v]);
        }
      }
    }
  }
#pragma GCC unroll 32
  for (int p = 0; p < P; ++p) {
#pragma GCC unroll 4
    for (int v = 0; v < V; ++v) Store(out + p * cout + kLanes * v, acc[p][v]);
  }
}

// P output pixels anywhere in the batch (src[p]: pixel p's first tap in the
// padded input; out: the first pixel's output, the others following it) x
// (kLanes * V) output channels. The AVX2 forward pass walks the batch's pixels
// as one run in blocks of P, so no block but the last is narrower than P.
template <int V, int P>
inline void MicroKernelAt(const float* const* src, int64_t in_row_stride, int64_t cin,
                          const float* kernel, int64_t k, int64_t cout, float* out) {
  Vec acc[P][V];
#pragma GCC unroll 32
  for (int p = 0; p < P; ++p) {
#pragma GCC unroll 4
    for (int v = 0; v < V; ++v) acc[p][v] = Zero();
  }
  for (int64_t i = 0; i < k; ++i) {
    for (int64_t j = 0; j < k; ++j) {
      const int64_t tap = i * in_row_stride + j * cin;
      const float* w = kernel + (i * k + j) * cin * cout;
      const float* in[P];
#pragma GCC unroll 32
      for (int p = 0; p < P; ++p) in[p] = src[p] + tap;
      for (int64_t ci = 0; ci < cin; ++ci) {
        Vec wv[V];
#pragma GCC unroll 4
        for (int v = 0; v < V; ++v) wv[v] = Load(w + ci * cout + kLanes * v);
#pragma GCC unroll 32
        for (int p = 0; p < P; ++p) {
          const Vec b = Broadcast(in[p][ci]);
#pragma GCC unroll 4
          for (int v = 0; v < V; ++v) acc[p][v] = Fma(b, wv[v], acc[p][v]);
        }
      }
    }
  }
#pragma GCC unroll 32
  for (int p = 0; p < P; ++p) {
#pragma GCC unroll 4
    for (int v = 0; v < V; ++v) Store(out + p * cout + kLanes * v, acc[p][v]);
  }
}

// Pixels [p0, p0 + np) of the batch (np <= 6), every output channel, sixteen
// at a time: AVX2's blocks.
void PixelsAvx2(const float* padded, int64_t out_h, int64_t out_w, int64_t in_h,
                int64_t in_row_stride, int64_t cin, const float* kernel, int64_t k, int64_t cout,
                int64_t p0, int64_t np, float* out) {
  const float* src[6];
  int64_t row = p0 / out_w, x = p0 % out_w;
  for (int64_t p = 0; p < np; ++p) {
    const int64_t n = row / out_h, y = row % out_h;
    src[p] = padded + (n * in_h + y) * in_row_stride + x * cin;
    if (++x == out_w) x = 0, ++row;
  }
  float* o = out + p0 * cout;
  for (int64_t co = 0; co < cout; co += 16) {
    switch (np) {
      case 6:
        MicroKernelAt<2, 6>(src, in_row_stride, cin, kernel + co, k, cout, o + co);
        break;
      case 5:
        MicroKernelAt<2, 5>(src, in_row_stride, cin, kernel + co, k, cout, o + co);
        break;
      case 4:
        MicroKernelAt<2, 4>(src, in_row_stride, cin, kernel + co, k, cout, o + co);
        break;
      case 3:
        MicroKernelAt<2, 3>(src, in_row_stride, cin, kernel + co, k, cout, o + co);
        break;
      case 2:
        MicroKernelAt<2, 2>(src, in_row_stride, cin, kernel + co, k, cout, o + co);
        break;
      default:
        MicroKernelAt<2, 1>(src, in_row_stride, cin, kernel + co, k, cout, o + co);
        break;
    }
  }
}

// Two output rows (y, y + 1) x P pixels x 16 channels: each input value is
// broadcast once for both rows (input row y + r serves tap r of row y and
// tap r - 1 of row y + 1), half the broadcasts of two single-row blocks.
template <int P>
inline void MicroKernelTwoRows(const float* in, int64_t in_row_stride, int64_t cin,
                               const float* kernel, int64_t k, int64_t cout, float* out,
                               int64_t out_row_stride) {
  Vec acc0[P], acc1[P];
#pragma GCC unroll 32
  for (int p = 0; p < P; ++p) acc0[p] = acc1[p] = Zero();
  for (int64_t r = 0; r <= k; ++r) {
    const bool first = r<k, second = r> 0;
    for (int64_t j = 0; j < k; ++j) {
      const float* src = in + r * in_row_stride + j * cin;
      // Tap (r, j) of row y and tap (r - 1, j) of row y + 1, where they exist.
      const float* w0 = first ? kernel + (r * k + j) * cin * cout : nullptr;
      const float* w1 = second ? kernel + ((r - 1) * k + j) * cin * cout : nullptr;
      if (first && second) {
        for (int64_t ci = 0; ci < cin; ++ci) {
          const Vec a = Load(w0 + ci * cout);
          const Vec b = Load(w1 + ci * cout);
#pragma GCC unroll 32
          for (int p = 0; p < P; ++p) {
            const Vec x = Broadcast(src[p * cin + ci]);
            acc0[p] = Fma(x, a, acc0[p]);
            acc1[p] = Fma(x, b, acc1[p]);
          }
        }
      } else if (first) {
        for (int64_t ci = 0; ci < cin; ++ci) {
          const Vec a = Load(w0 + ci * cout);
#pragma GCC unroll 32
          for (int p = 0; p < P; ++p) {
            acc0[p] = Fma(Broadcast(src[p * cin + ci]), a, acc0[p]);
          }
        }
      } else {
        for (int64_t ci = 0; ci < cin; ++ci) {
          const Vec b = Load(w1 + ci * cout);
#pragma GCC unroll 32
          for (int p = 0; p < P; ++p) {
            acc1[p] = Fma(Broadcast(src[p * cin + ci]), b, acc1[p]);
          }
        }
      }
    }
  }
#pragma GCC unroll 32
  for (int p = 0; p < P; ++p) {
    Store(out + p * cout, acc0[p]);
    Store(out + out_row_stride + p * cout, acc1[p]);
  }
}

// The register-block width for `n` items with at most `wide` per block: on
// AVX-512 a divisor of n of at least wide / 2 when there is one (32 pixels as
// 16 + 16 rather than 24 + 8), else `wide` (the rest then in narrower
// blocks).
constexpr int kWidths[] = {24, 16, 12, 8, 6, 4, 3, 2, 1};

int BlockWidth(int64_t n, int wide) {
  for (int w : kWidths) {
    // AVX2: the widest block first. Its 16 registers leave a narrower
    // block too few accumulators to hide the FMA latency (4 pixels x 2
    // vectors ran at half the speed of 6 x 2).
    if (kLanes == 8 && w == wide) return w;
    if (w <= wide && 2 * w >= wide && n % w == 0) return w;
  }
  return wide;
}

// Calls fn(std::integral_constant<int, P>) for blocks covering [0, n): as
// many of width BlockWidth(n, kWide) as fit, then narrower ones.
template <int kWide, typename Fn>
void ForBlocks(int64_t n, Fn&& fn) {
  int64_t at = 0;
  const int first = BlockWidth(n, kWide);
  auto run = [&](auto width) {
    constexpr int P = decltype(width)::value;
    if constexpr (P <= kWide) {
      for (; at + P <= n; at += P) fn(at, width);
    }
  };
  switch (first) {
    case 24:
      run(std::integral_constant<int, 24>{});
      break;
    case 16:
      run(std::integral_constant<int, 16>{});
      break;
    case 12:
      run(std::integral_constant<int, 12>{});
      break;
    case 8:
      run(std::integral_constant<int, 8>{});
      break;
    case 6:
      run(std::integral_constant<int, 6>{});
      break;
    case 4:
      run(std::integral_constant<int, 4>{});
      break;
    default:
      break;
  }
  run(std::integral_constant<int, kWide>{});
  run(std::integral_constant<int, 8>{});
  run(std::integral_constant<int, 4>{});
  run(std::integral_constant<int, 2>{});
  run(std::integral_constant<int, 1>{});
}

// Output rows y and y + 1 for channels [co, co + 16).
void TwoRows(const float* in, int64_t in_row_stride, int64_t out_w, int64_t cin,
             const float* kernel, int64_t k, int64_t cout, float* out) {
  ForBlocks<12>(out_w, [&](int64_t x, auto width) {
    constexpr int P = decltype(width)::value;
    MicroKernelTwoRows<P>(in + x * cin, in_row_stride, cin, kernel, k, cout, out + x * cout,
                          out_w * cout);
  });
}

// One output row's pixels [0, out_w) for channels [co, co + kLanes V): the
// widest register block first, then narrower ones for the rest.
template <int V>
void Row(const float* in, int64_t in_row_stride, int64_t out_w, int64_t cin, const float* kernel,
         int64_t k, int64_t cout, float* out) {
  ForBlocks<kMaxBlock<V>>(out_w, [&](int64_t x, auto width) {
    constexpr int P = decltype(width)::value;
    MicroKernel<V, P>(in + x * cin, in_row_stride, cin, kernel, k, cout, out + x * cout);
  });
}

// The kernel gradient's tiles of output rows (below): 24 KiB of output
// gradients and input rows, measured best on AVX2 (Zen 3, 32 KiB L1). AVX-512
// builds keep one tile per group, as they were measured.
constexpr int64_t kGradTileBytes = kLanes == 8 ? 24 << 10 : int64_t{1} << 40;

// Kernel-gradient block: input channels [0, C) (of `in`, which points at
// channel ci0 of the tap's first pixel) x output channels kLanes V, summed over
// output rows [r0, r1) of `out_w` pixels, added to `grad` when `accumulate`.
template <int V, int C>
inline void GradMicroKernel(const float* in, int64_t in_row_stride, int64_t r0, int64_t r1,
                            int64_t rows_per_example, int64_t example_stride, int64_t out_w,
                            int64_t cin, const float* dy, int64_t cout, bool accumulate,
                            float* grad) {
  Vec acc[C][V];
#pragma GCC unroll 32
  for (int c = 0; c < C; ++c) {
#pragma GCC unroll 4
    for (int v = 0; v < V; ++v) {
      acc[c][v] = accumulate ? Load(grad + c * cout + kLanes * v) : Zero();
    }
  }
  for (int64_t r = r0; r < r1; ++r) {
    const int64_t n = r / rows_per_example, y = r % rows_per_example;
    const float* src = in + n * example_stride + y * in_row_stride;
    const float* g = dy + r * out_w * cout;
    for (int64_t x = 0; x < out_w; ++x) {
      Vec gv[V];
#pragma GCC unroll 4
      for (int v = 0; v < V; ++v) gv[v] = Load(g + x * cout + kLanes * v);
#pragma GCC unroll 32
      for (int c = 0; c < C; ++c) {
        const Vec b = Broadcast(src[x * cin + c]);
#pragma GCC unroll 4
        for (int v = 0; v < V; ++v) acc[c][v] = Fma(b, gv[v], acc[c][v]);
      }
    }
  }
#pragma GCC unroll 32
  for (int c = 0; c < C; ++c) {
#pragma GCC unroll 4
    for (int v = 0; v < V; ++v) Store(grad + c * cout + kLanes * v, acc[c][v]);
  }
}

// Every input channel of one tap for channels [co, co + kLanes V).
template <int V>
void GradTap(const float* in, int64_t in_row_stride, int64_t r0, int64_t r1,
             int64_t rows_per_example, int64_t example_stride, int64_t out_w, int64_t cin,
             const float* dy, int64_t cout, bool accumulate, float* grad) {
  ForBlocks<kMaxBlock<V>>(cin, [&](int64_t c, auto width) {
    constexpr int C = decltype(width)::value;
    GradMicroKernel<V, C>(in + c, in_row_stride, r0, r1, rows_per_example, example_stride, out_w,
                          cin, dy, cout, accumulate, grad + c * cout);
  });
}

// AVX2, K x K kernels with K = 3 (an even number of input channels) or 5:
// one kernel row's K taps x input channels [c, c + C) (of `in`, which points
// at channel c of tap (i, 0)'s first pixel) x sixteen output channels, in 12
// (K = 3, C = 2) or 10 (K = 5, C = 1) accumulators, with no narrower rest.
template <int K, int C>
inline void GradRowOfTaps(const float* in, int64_t in_row_stride, int64_t r0, int64_t r1,
                          int64_t rows_per_example, int64_t example_stride, int64_t out_w,
                          int64_t cin, const float* dy, int64_t cout, bool accumulate,
                          float* grad) {
  // grad + (j * cin + c) * cout + kLanes v: tap j, channel c, vector v.
  Vec acc[K][C][2];
#pragma GCC unroll 5
  for (int j = 0; j < K; ++j) {
#pragma GCC unroll 2
    for (int c = 0; c < C; ++c) {
#pragma GCC unroll 2
      for (int v = 0; v < 2; ++v) {
        acc[j][c][v] = accumulate ? Load(grad + (j * cin + c) * cout + kLanes * v) : Zero();
      }
    }
  }
  for (int64_t r = r0; r < r1; ++r) {
    const int64_t n = r / rows_per_example, y = r % rows_per_example;
    const float* src = in + n * example_stride + y * in_row_stride;
    const float* g = dy + r * out_w * cout;
    for (int64_t x = 0; x < out_w; ++x) {
      const Vec g0 = Load(g + x * cout), g1 = Load(g + x * cout + kLanes);
#pragma GCC unroll 5
      for (int j = 0; j < K; ++j) {
#pragma GCC unroll 2
        for (int c = 0; c < C; ++c) {
          const Vec b = Broadcast(src[(x + j) * cin + c]);
          acc[j][c][0] = Fma(b, g0, acc[j][c][0]);
          acc[j][c][1] = Fma(b, g1, acc[j][c][1]);
        }
      }
    }
  }
#pragma GCC unroll 5
  for (int j = 0; j < K; ++j) {
#pragma GCC unroll 2
    for (int c = 0; c < C; ++c) {
#pragma GCC unroll 2
      for (int v = 0; v < 2; ++v) Store(grad + (j * cin + c) * cout + kLanes * v, acc[j][c][v]);
    }
  }
}

// Every input channel of kernel row i's taps (`in`: tap (i, 0)) for
// channels [co, co + 16), as GradRowOfTaps<K, C> blocks.
template <int K, int C>
void GradRow(const float* in, int64_t in_row_stride, int64_t r0, int64_t r1,
             int64_t rows_per_example, int64_t example_stride, int64_t out_w, int64_t cin,
             const float* dy, int64_t cout, bool accumulate, float* grad) {
  for (int64_t c = 0; c < cin; c += C) {
    GradRowOfTaps<K, C>(in + c, in_row_stride, r0, r1, rows_per_example, example_stride, out_w, cin,
                        dy, cout, accumulate, grad + c * cout);
  }
}

}  // namespace

void DirectConvKernelGradStride1(const float* padded, int64_t batch, int64_t out_h, int64_t out_w,
                                 int64_t cin, const float* dout, int64_t k, int64_t cout,
                                 std::vector<float>* scratch, float* grad) {
  const int64_t in_h = out_h + k - 1, in_w = out_w + k - 1;
  const int64_t in_row_stride = in_w * cin;
  const int64_t example_stride = in_h * in_row_stride;
  const int64_t size = k * k * cin * cout;
  // Groups of examples small enough to stay in the L2 cache while every tap
  // and channel block passes over them (AVX2: 512 KiB, which halves the
  // partials to add on the small maps; AVX-512 as it was measured).
  const int64_t group_bytes = kLanes == 8 ? 512 << 10 : 256 << 10;
  const int64_t per_group =
      std::max<int64_t>(1, group_bytes / ((example_stride + out_h * out_w * cout) * 4));
  const int64_t groups = (batch + per_group - 1) / per_group;
  scratch->resize(groups * size);
  // Within a group, tiles of output rows whose gradients and input rows stay
  // in the L1 cache while every tap and channel block passes over them; the
  // blocks' sums accumulate in the group's partial.
  const int64_t row_bytes = (in_row_stride + out_w * cout) * int64_t{sizeof(float)};
  const int64_t tile = std::max<int64_t>(1, kGradTileBytes / row_bytes);
  ParallelFor(groups, 1, [&](int64_t begin, int64_t end) {
    for (int64_t g = begin; g < end; ++g) {
      const int64_t n0 = g * per_group, n = std::min(per_group, batch - n0);
      float* part = scratch->data() + g * size;
      const float* dy = dout + n0 * out_h * out_w * cout;
      const int64_t rows = n * out_h;
      for (int64_t r0 = 0; r0 < rows; r0 += tile) {
        const int64_t r1 = std::min(rows, r0 + tile);
        const bool accumulate = r0 > 0;
        // AVX2 only: GradRowOfTaps's two vectors are sixteen channels there.
        if constexpr (kLanes == 8) {
          if ((k == 3 && cin % 2 == 0) || k == 5) {
            for (int64_t i = 0; i < k; ++i) {
              const float* in = padded + n0 * example_stride + i * in_row_stride;
              for (int64_t co = 0; co < cout; co += 16) {
                float* row = part + i * k * cin * cout + co;
                if (k == 3) {
                  GradRow<3, 2>(in, in_row_stride, r0, r1, out_h, example_stride, out_w, cin,
                                dy + co, cout, accumulate, row);
                } else {
                  GradRow<5, 1>(in, in_row_stride, r0, r1, out_h, example_stride, out_w, cin,
                                dy + co, cout, accumulate, row);
                }
              }
            }
            continue;
          }
        }
        for (int64_t i = 0; i < k; ++i) {
          for (int64_t j = 0; j < k; ++j) {
            const float* in = padded + n0 * example_stride + i * in_row_stride + j * cin;
            float* tap = part + (i * k + j) * cin * cout;
            for (int64_t co = 0; co < cout;) {
              const int64_t left = (cout - co) / 16;
              if constexpr (kLanes == 8) {
                // AVX2: sixteen channels (two vectors) by up to six input
                // channels fill 12 of the 16 registers.
                GradTap<2>(in, in_row_stride, r0, r1, out_h, example_stride, out_w, cin, dy + co,
                           cout, accumulate, tap + co);
                co += 16;
                continue;
              }
              // Blocks of many input channels and few output channels: each
              // pass over the tile's positions then reads one cache line of
              // input and one of output gradient per position.
              if (left >= 4 && cin < 16) {
                GradTap<4>(in, in_row_stride, r0, r1, out_h, example_stride, out_w, cin, dy + co,
                           cout, accumulate, tap + co);
                co += 64;
              } else if (left == 3 && cin < 16) {
                GradTap<3>(in, in_row_stride, r0, r1, out_h, example_stride, out_w, cin, dy + co,
                           cout, accumulate, tap + co);
                co += 48;
              } else if (left >= 2 && cin < 64) {
                GradTap<2>(in, in_row_stride, r0, r1, out_h, example_stride, out_w, cin, dy + co,
                           cout, accumulate, tap + co);
                co += 32;
              } else {
                GradTap<1>(in, in_row_stride, r0, r1, out_h, example_stride, out_w, cin, dy + co,
                           cout, accumulate, tap + co);
                co += 16;
              }
            }
          }
        }
      }
    }
  });
  // Group partials in group order, in parallel over elements.
  ParallelFor(size, 4096, [&](int64_t begin, int64_t end) {
    for (int64_t e = begin; e < end; ++e) {
      float sum = 0;
      for (int64_t g = 0; g < groups; ++g) sum += (*scratch)[g * size + e];
      grad[e] = sum;
    }
  });
}

bool DirectConvSupported(int64_t out_channels) {
  return out_channels > 0 && out_channels % 16 == 0;
}

void DirectConvStride1(const float* padded, int64_t batch, int64_t out_h, int64_t out_w,
                       int64_t cin, const float* kernel, int64_t k, int64_t cout, float* out) {
  const int64_t in_h = out_h + k - 1, in_w = out_w + k - 1;
  const int64_t in_row_stride = in_w * cin;
  if (kLanes == 16 && cout == 16 && out_h % 2 == 0) {  // AVX-512 only: see TwoRows
    // Sixteen channels: pairs of rows share their broadcasts.
    const int64_t pairs = out_h / 2;
    ParallelFor(batch * pairs, 2, [&](int64_t begin, int64_t end) {
      for (int64_t pair = begin; pair < end; ++pair) {
        const int64_t n = pair / pairs, y = 2 * (pair % pairs);
        TwoRows(padded + (n * in_h + y) * in_row_stride, in_row_stride, out_w, cin, kernel, k, cout,
                out + (n * out_h + y) * out_w * cout);
      }
    });
    return;
  }
  if constexpr (kLanes == 8) {
    // AVX2: the batch's pixels as one run, in blocks of six pixels by
    // sixteen channels (12 of the 16 registers), so that no block but the
    // last is narrower (a narrower one has too few accumulators to hide the
    // FMA latency: the 2-pixel rest of a 32- or 8-pixel row ran at half
    // speed).
    const int64_t pixels = batch * out_h * out_w;
    ParallelFor((pixels + 5) / 6, 8, [&](int64_t begin, int64_t end) {
      for (int64_t b = begin; b < end; ++b) {
        PixelsAvx2(padded, out_h, out_w, in_h, in_row_stride, cin, kernel, k, cout, 6 * b,
                   std::min<int64_t>(6, pixels - 6 * b), out);
      }
    });
    return;
  }
  ParallelFor(batch * out_h, 4, [&](int64_t begin, int64_t end) {
    for (int64_t row = begin; row < end; ++row) {
      const int64_t n = row / out_h, y = row % out_h;
      const float* in = padded + (n * in_h + y) * in_row_stride;
      float* o = out + row * out_w * cout;
      for (int64_t co = 0; co < cout;) {
        const int64_t left = (cout - co) / 16;
        // Four vectors of channels only when a row holds enough pixels for
        // six-pixel blocks; on narrow maps, wider pixel blocks of fewer
        // channels stream the weights less often.
        if (left >= 4 && out_w >= 12) {
          Row<4>(in, in_row_stride, out_w, cin, kernel + co, k, cout, o + co);
          co += 64;
        } else if (left == 3) {
          Row<3>(in, in_row_stride, out_w, cin, kernel + co, k, cout, o + co);
          co += 48;
        } else if (left == 2) {
          Row<2>(in, in_row_stride, out_w, cin, kernel + co, k, cout, o + co);
          co += 32;
        } else {
          Row<1>(in, in_row_stride, out_w, cin, kernel + co, k, cout, o + co);
          co += 16;
        }
      }
    }
  });
}

#else  // !PSTRAIN_DIRECT_CONV_KERNELS

bool DirectConvSupported(int64_t) { return false; }

void DirectConvStride1(const float*, int64_t, int64_t, int64_t, int64_t, const float*, int64_t,
                       int64_t, float*) {
  // Conv2D checks DirectConvSupported first; this build has no kernels.
  __builtin_trap();
}

void DirectConvKernelGradStride1(const float*, int64_t, int64_t, int64_t, int64_t, const float*,
                                 int64_t, int64_t, std::vector<float>*, float*) {
  __builtin_trap();
}

#endif

}  // namespace pstrain
