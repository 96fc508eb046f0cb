// The quantized dot-product kernels behind the weight-type table (internal to kernels/cpu): one
// function per (weight type, layout, instruction set), one signature per layout (plain rows,
// interleaved row groups), and the repacks into the interleaved layouts.
#pragma once

#include <cstddef>
#include <cstdint>

#include "kernels/cpu/activation_rows.h"
#include "kernels/cpu/matmul_kernels.h"

namespace tandem::kernels::detail {

// y[t * y_stride + r] = dot(weight row r, activation row t) for r < rows, t < x.n_tokens.
// Weight row r is at w + r * row_bytes in the type's GGUF block layout (little-endian, any
// alignment), x.cols elements long (a whole number of the type's blocks and of the activation
// format's blocks); x is in the format the type's table row names. Pure: reads w and x, writes
// only those y elements, any thread, any number at once on disjoint y. Each y element depends only
// on its own weight row and activation row, never on rows, n_tokens or the element's position
// (so any split over threads gives bit-identical results).
//
// Reference semantics (the *_scalar functions implement them literally; every SIMD variant is
// bit-identical to them unless its declaration below states a bound):
//  - a block's integer part is an exact int32 sum of products of the weight quants (as the type
//    defines them) and the activation quants;
//  - float math per block in the order written at each function, accumulated into one float sum
//    in block order, starting from 0.0f, with no fused multiply-add.
using QuantDotFn = void (*)(const uint8_t* w, size_t row_bytes, size_t rows,
                            const ActivationRows& x, float* y, size_t y_stride);

// ---- Q8_0 weights (block: f16 d, 32 int8 quants q; value q * d) x Q8_0 activations:
// per block sum += float(isum) * (dw * dx) with isum = sum q * xq. (Until 2026-12 this type kept
// eight float partial sums, ggml's AVX2 order; the block-order sum lets the 32-element-block
// kernels of quant_dot_legacy_walk.h sum 8 or 16 rows in the lanes of one register, about 1.6x
// (AVX2) and 2.5x (AVX-512 VNNI) the multi-token rate of the eight-lane tiles.)
void dot_q8_0_scalar(const uint8_t* w, size_t row_bytes, size_t rows, const ActivationRows& x,
                     float* y, size_t y_stride);

// ---- Q4_0 weights (block: f16 d, 16 bytes of nibbles; element j < 16 = low nibble of qs[j],
// j >= 16 = high nibble of qs[j - 16]; value (q - 8) * d) x Q8_0 activations:
// per block sum += float(isum) * (dw * dx) with isum = sum (q - 8) * xq.
void dot_q4_0_scalar(const uint8_t* w, size_t row_bytes, size_t rows, const ActivationRows& x,
                     float* y, size_t y_stride);

// ---- Q5_0 weights (block: f16 d, 4 bytes qh (32 high bits, little-endian), 16 bytes of nibbles
// laid out as Q4_0; element j's value is (nibble | bit j of qh << 4) - 16, in -16..15, times d;
// what llama-quantize falls back to when a K-quant's row is not a multiple of 256) x Q8_0
// activations: per block sum += float(isum) * (dw * dx) with isum = sum q * xq.
void dot_q5_0_scalar(const uint8_t* w, size_t row_bytes, size_t rows, const ActivationRows& x,
                     float* y, size_t y_stride);

// ---- MXFP4 weights (block of 32: uint8 e8m0 exponent e, 16 bytes of nibbles laid out as Q4_0;
// value kMxfp4Values[q] * 2^(e - 128), kMxfp4Values = {0, 1, 2, 3, 4, 6, 8, 12, 0, -1, -2, -3, -4,
// -6, -8, -12}, i.e. the E2M1 values doubled) x Q8_0 activations:
// per block sum += float(isum) * (dx * de) with isum = sum kMxfp4Values[q] * xq, de = 2^(e - 128).
void dot_mxfp4_scalar(const uint8_t* w, size_t row_bytes, size_t rows, const ActivationRows& x,
                      float* y, size_t y_stride);

// ---- IQ4_NL and IQ4_XS: 4-bit codes q standing for the non-linear values kIq4Values[q] =
// {-127, -104, -83, -65, -49, -35, -22, -10, 1, 13, 25, 38, 53, 69, 89, 113} (iq4_values.h).
// IQ4_NL weights (block of 32: f16 d, 16 bytes of nibbles laid out as Q4_0; value d *
// kIq4Values[q]; what llama-quantize falls back to for the IQ types, and in older llama.cpp
// versions for Q2_K / Q3_K too, when a row is not a multiple of 256) x Q8_0 activations: per block
// sum += float(isum) * (dw * dx), isum = sum kIq4Values[q] * xq. IQ4_XS weights (super-block of
// 256: f16 d, uint16 scales_h, 4 bytes scales_l, 128 bytes qs; sub-block j of 32 elements has ls_j
// = nibble j of scales_l | bits 2j..2j+1 of scales_h << 4 and its quants at qs + 16j laid out as
// Q4_0; value (d * (ls_j - 32)) * kIq4Values[q]) x Q8_K activations: isum = sum_j (ls_j - 32) *
// (sum over sub-block j of kIq4Values[q] * xq); sum += (dw * dx) * float(isum). The AVX2 and
// AVX-512 VNNI variants are bit-identical to these for every int8 activation quant.
void dot_iq4_nl_scalar(const uint8_t* w, size_t row_bytes, size_t rows, const ActivationRows& x,
                       float* y, size_t y_stride);
void dot_iq4_xs_scalar(const uint8_t* w, size_t row_bytes, size_t rows, const ActivationRows& x,
                       float* y, size_t y_stride);
void dot_iq4_nl_avx2(const uint8_t* w, size_t row_bytes, size_t rows, const ActivationRows& x,
                     float* y, size_t y_stride);
void dot_iq4_xs_avx2(const uint8_t* w, size_t row_bytes, size_t rows, const ActivationRows& x,
                     float* y, size_t y_stride);
void dot_iq4_nl_avx512_vnni(const uint8_t* w, size_t row_bytes, size_t rows,
                            const ActivationRows& x, float* y, size_t y_stride);
void dot_iq4_xs_avx512_vnni(const uint8_t* w, size_t row_bytes, size_t rows,
                            const ActivationRows& x, float* y, size_t y_stride);

// ---- The grid i-quants x Q8_K activations (layouts: iq_blocks.h). Per 32-element sub-block ib
// and group l of 8 elements, v_j = the grid value of element j with its sign (IQ1: the grid value,
// -1..1) and s_l the group's scale code; per super-block
//   isum = sum_{ib, l} (2 s_l + 1) * G_l,  G_l = sum_j v_j * xq_j
// except IQ1_S / IQ1_M, whose G_l = 8 * sum_j v_j * xq_j + delta_l * sum_j xq_j (delta_l = +-1,
// the sign of the group's +-1/8 shift); then sum += ((dw * factor) * dx) * float(isum), factor
// 0.125f (IQ1_*, IQ2_*), 0.25f (IQ3_XXS) or 1 (IQ3_S): ggml's dot products with its float
// factor moved into dw (exact: a power of two). IQ1_M's dw is the f16 spread over its scales. The
// AVX2 and AVX-512 VNNI variants are bit-identical to these for every int8 activation quant.
void dot_iq1_s_scalar(const uint8_t* w, size_t row_bytes, size_t rows, const ActivationRows& x,
                      float* y, size_t y_stride);
void dot_iq1_m_scalar(const uint8_t* w, size_t row_bytes, size_t rows, const ActivationRows& x,
                      float* y, size_t y_stride);
void dot_iq2_xxs_scalar(const uint8_t* w, size_t row_bytes, size_t rows, const ActivationRows& x,
                        float* y, size_t y_stride);
void dot_iq2_xs_scalar(const uint8_t* w, size_t row_bytes, size_t rows, const ActivationRows& x,
                       float* y, size_t y_stride);
void dot_iq2_s_scalar(const uint8_t* w, size_t row_bytes, size_t rows, const ActivationRows& x,
                      float* y, size_t y_stride);
void dot_iq3_xxs_scalar(const uint8_t* w, size_t row_bytes, size_t rows, const ActivationRows& x,
                        float* y, size_t y_stride);
void dot_iq3_s_scalar(const uint8_t* w, size_t row_bytes, size_t rows, const ActivationRows& x,
                      float* y, size_t y_stride);
void dot_iq1_s_avx2(const uint8_t* w, size_t row_bytes, size_t rows, const ActivationRows& x,
                    float* y, size_t y_stride);
void dot_iq1_m_avx2(const uint8_t* w, size_t row_bytes, size_t rows, const ActivationRows& x,
                    float* y, size_t y_stride);
void dot_iq2_xxs_avx2(const uint8_t* w, size_t row_bytes, size_t rows, const ActivationRows& x,
                      float* y, size_t y_stride);
void dot_iq2_xs_avx2(const uint8_t* w, size_t row_bytes, size_t rows, const ActivationRows& x,
                     float* y, size_t y_stride);
void dot_iq2_s_avx2(const uint8_t* w, size_t row_bytes, size_t rows, const ActivationRows& x,
                    float* y, size_t y_stride);
void dot_iq3_xxs_avx2(const uint8_t* w, size_t row_bytes, size_t rows, const ActivationRows& x,
                      float* y, size_t y_stride);
void dot_iq3_s_avx2(const uint8_t* w, size_t row_bytes, size_t rows, const ActivationRows& x,
                    float* y, size_t y_stride);
void dot_iq1_s_avx512_vnni(const uint8_t* w, size_t row_bytes, size_t rows, const ActivationRows& x,
                           float* y, size_t y_stride);
void dot_iq1_m_avx512_vnni(const uint8_t* w, size_t row_bytes, size_t rows, const ActivationRows& x,
                           float* y, size_t y_stride);
void dot_iq2_xxs_avx512_vnni(const uint8_t* w, size_t row_bytes, size_t rows,
                             const ActivationRows& x, float* y, size_t y_stride);
void dot_iq2_xs_avx512_vnni(const uint8_t* w, size_t row_bytes, size_t rows,
                            const ActivationRows& x, float* y, size_t y_stride);
void dot_iq2_s_avx512_vnni(const uint8_t* w, size_t row_bytes, size_t rows, const ActivationRows& x,
                           float* y, size_t y_stride);
void dot_iq3_xxs_avx512_vnni(const uint8_t* w, size_t row_bytes, size_t rows,
                             const ActivationRows& x, float* y, size_t y_stride);
void dot_iq3_s_avx512_vnni(const uint8_t* w, size_t row_bytes, size_t rows, const ActivationRows& x,
                           float* y, size_t y_stride);

// ---- K-quants x Q8_K activations, per 256-super-block.
// Q4_K / Q5_K: isum = sum_j scale_j * (sum over sub-block j of q * xq), q in 0..15 / 0..31,
// imin = sum_j min_j * (bsums[2j] + bsums[2j+1]); sum += dw * dx * float(isum) - dmin * dx *
// float(imin), evaluated left to right: ((dw * dx) * float(isum)) - ((dmin * dx) * float(imin)).
// Q6_K: isum = sum_j scales_j * (sum over 16-element group j of q * xq), q in -32..31;
// sum += (dw * dx) * float(isum).
// Q2_K (16-element groups j, 4-bit scale_j and min_j, q in 0..3): isum = sum_j scale_j * (sum
// over group j of q * xq), imin = sum_j min_j * bsums[j]; sum += ((dw * dx) * float(isum)) -
// ((dmin * dx) * float(imin)), as Q4_K.
// Q3_K (16-element groups j, 6-bit scale_j, q in -4..3 = the 2 low bits minus 4 unless the hmask
// bit is set): isum = sum_j (scale_j - 32) * (sum over group j of q * xq); sum += (dw * dx) *
// float(isum), as Q6_K.
void dot_q4_k_scalar(const uint8_t* w, size_t row_bytes, size_t rows, const ActivationRows& x,
                     float* y, size_t y_stride);
void dot_q5_k_scalar(const uint8_t* w, size_t row_bytes, size_t rows, const ActivationRows& x,
                     float* y, size_t y_stride);
void dot_q6_k_scalar(const uint8_t* w, size_t row_bytes, size_t rows, const ActivationRows& x,
                     float* y, size_t y_stride);
void dot_q2_k_scalar(const uint8_t* w, size_t row_bytes, size_t rows, const ActivationRows& x,
                     float* y, size_t y_stride);
void dot_q3_k_scalar(const uint8_t* w, size_t row_bytes, size_t rows, const ActivationRows& x,
                     float* y, size_t y_stride);

// AVX2 (+FMA +F16C) variants; callable only when cpu_features() reports them. Calls of many tokens
// take the tokens in the lanes (quant_dot_x8_lanes.h): Q3_K from 16 tokens, Q2_K from 32, the
// grid i-quants from 16; on AVX-512 VNNI Q2_K and Q3_K from 64, IQ4_XS from 16.
void dot_q8_0_avx2(const uint8_t* w, size_t row_bytes, size_t rows, const ActivationRows& x,
                   float* y, size_t y_stride);
void dot_q4_0_avx2(const uint8_t* w, size_t row_bytes, size_t rows, const ActivationRows& x,
                   float* y, size_t y_stride);
void dot_q5_0_avx2(const uint8_t* w, size_t row_bytes, size_t rows, const ActivationRows& x,
                   float* y, size_t y_stride);
void dot_mxfp4_avx2(const uint8_t* w, size_t row_bytes, size_t rows, const ActivationRows& x,
                    float* y, size_t y_stride);
void dot_q4_k_avx2(const uint8_t* w, size_t row_bytes, size_t rows, const ActivationRows& x,
                   float* y, size_t y_stride);
void dot_q5_k_avx2(const uint8_t* w, size_t row_bytes, size_t rows, const ActivationRows& x,
                   float* y, size_t y_stride);
void dot_q6_k_avx2(const uint8_t* w, size_t row_bytes, size_t rows, const ActivationRows& x,
                   float* y, size_t y_stride);
void dot_q2_k_avx2(const uint8_t* w, size_t row_bytes, size_t rows, const ActivationRows& x,
                   float* y, size_t y_stride);
void dot_q3_k_avx2(const uint8_t* w, size_t row_bytes, size_t rows, const ActivationRows& x,
                   float* y, size_t y_stride);

// AVX-512 VNNI (+ F/BW/VL) variant; callable only when cpu_features() reports them.
void dot_q8_0_avx512_vnni(const uint8_t* w, size_t row_bytes, size_t rows, const ActivationRows& x,
                          float* y, size_t y_stride);
void dot_q4_0_avx512_vnni(const uint8_t* w, size_t row_bytes, size_t rows, const ActivationRows& x,
                          float* y, size_t y_stride);
void dot_q5_0_avx512_vnni(const uint8_t* w, size_t row_bytes, size_t rows, const ActivationRows& x,
                          float* y, size_t y_stride);
void dot_mxfp4_avx512_vnni(const uint8_t* w, size_t row_bytes, size_t rows, const ActivationRows& x,
                           float* y, size_t y_stride);
void dot_q4_k_avx512_vnni(const uint8_t* w, size_t row_bytes, size_t rows, const ActivationRows& x,
                          float* y, size_t y_stride);
void dot_q5_k_avx512_vnni(const uint8_t* w, size_t row_bytes, size_t rows, const ActivationRows& x,
                          float* y, size_t y_stride);
void dot_q6_k_avx512_vnni(const uint8_t* w, size_t row_bytes, size_t rows, const ActivationRows& x,
                          float* y, size_t y_stride);
void dot_q2_k_avx512_vnni(const uint8_t* w, size_t row_bytes, size_t rows, const ActivationRows& x,
                          float* y, size_t y_stride);
void dot_q3_k_avx512_vnni(const uint8_t* w, size_t row_bytes, size_t rows, const ActivationRows& x,
                          float* y, size_t y_stride);

// AMX-INT8 (+ AVX-512 VNNI; callable only when matmul_variant_supported(kAmx)): TDPBSUD tiles of
// 16 tokens x 16 rows per 16-element group, bit-identical to dot_q6_k_scalar; the rows after the
// last whole 16 and calls with few tokens run dot_q6_k_avx512_vnni.
void dot_q6_k_amx(const uint8_t* w, size_t row_bytes, size_t rows, const ActivationRows& x,
                  float* y, size_t y_stride);
// The same for Q5_K (TDPBSUD per 32-element sub-block, Q4_K's block arithmetic), bit-identical
// to dot_q5_k_scalar; the rest runs dot_q5_k_avx512_vnni.
void dot_q5_k_amx(const uint8_t* w, size_t row_bytes, size_t rows, const ActivationRows& x,
                  float* y, size_t y_stride);

// ---- Interleaved layouts (WeightLayout::kInterleaved8, weight_matrix.h): the rows in groups of
// 8, group g (rows 8g .. 8g+7) at groups + g * 8 * row_bytes, a permutation of those rows' bytes;
// a last partial group is padded with zero rows (their outputs are computed and dropped).
//
// Repack: writes the interleaved copy of `rows` plain rows (row_bytes apart, packed) to groups,
// ceil(rows / 8) * 8 * row_bytes bytes (padding included). Pure, any thread.
using RepackFn = void (*)(const uint8_t* w, size_t row_bytes, size_t rows, uint8_t* groups);
// Dot product on an interleaved matrix: y[t * y_stride + (r - row_begin)] = dot(row r, activation
// row t) for r in [row_begin, row_end) (any range; groups points at the matrix's first group) and
// t < x.n_tokens, bit-identical to the plain-row kernel's reference semantics for the same type.
// Pure, any thread, as QuantDotFn.
using InterleavedDotFn = void (*)(const uint8_t* groups, size_t row_begin, size_t row_end,
                                  const ActivationRows& x, float* y, size_t y_stride);

// ---- The x8 block interleave of Q8_0, Q4_0, Q5_0 and IQ4_NL: per group, the blocks in column
// order, each the eight rows' plain blocks of that column side by side (block b of row 8g + i at
// g * 8 * row_bytes + b * 8 * kBytes + i * kBytes; kBytes 34, 18, 22, 18), byte for byte as in the
// plain rows. The kernels do the plain-row arithmetic (the same bits); they only read one
// sequential run per group where the plain rows are eight strided ones (AVX2 Q8_0, one token
// streaming 256 MiB on a Zen 4 thread: 13.4 GB/s on plain rows).
void repack_q8_0_x8(const uint8_t* w, size_t row_bytes, size_t rows, uint8_t* groups);
void repack_q4_0_x8(const uint8_t* w, size_t row_bytes, size_t rows, uint8_t* groups);
void repack_q5_0_x8(const uint8_t* w, size_t row_bytes, size_t rows, uint8_t* groups);
void repack_iq4_nl_x8(const uint8_t* w, size_t row_bytes, size_t rows, uint8_t* groups);
void dot_q8_0_x8_scalar(const uint8_t* groups, size_t row_begin, size_t row_end,
                        const ActivationRows& x, float* y, size_t y_stride);
void dot_q4_0_x8_scalar(const uint8_t* groups, size_t row_begin, size_t row_end,
                        const ActivationRows& x, float* y, size_t y_stride);
void dot_q5_0_x8_scalar(const uint8_t* groups, size_t row_begin, size_t row_end,
                        const ActivationRows& x, float* y, size_t y_stride);
void dot_iq4_nl_x8_scalar(const uint8_t* groups, size_t row_begin, size_t row_end,
                          const ActivationRows& x, float* y, size_t y_stride);
// AVX2 (and the plain AVX-512 column; Q8_0's x8 kernel serves that column only, the AVX2 one
// computes Q8_0 on its row quads below): the plain-row kernels' 8-row groups on the interleave,
// each group's first token tile prefetching 2 KiB ahead (prefetch_ahead.h); the unprefetched Q8_0
// form is the AVX-512 VNNI kernel's one-token path.
void dot_q8_0_x8_avx2(const uint8_t* groups, size_t row_begin, size_t row_end,
                      const ActivationRows& x, float* y, size_t y_stride);
void dot_q8_0_x8_unprefetched_avx2(const uint8_t* groups, size_t row_begin, size_t row_end,
                                   const ActivationRows& x, float* y, size_t y_stride);
void dot_q4_0_x8_avx2(const uint8_t* groups, size_t row_begin, size_t row_end,
                      const ActivationRows& x, float* y, size_t y_stride);
void dot_q5_0_x8_avx2(const uint8_t* groups, size_t row_begin, size_t row_end,
                      const ActivationRows& x, float* y, size_t y_stride);
void dot_iq4_nl_x8_avx2(const uint8_t* groups, size_t row_begin, size_t row_end,
                        const ActivationRows& x, float* y, size_t y_stride);
// AVX-512 VNNI, Q8_0 only: the plain-row kernel's 16-row tiles (two groups) on the interleave, one
// token through dot_q8_0_x8_unprefetched_avx2. (Q4_0, Q5_0 and IQ4_NL keep their plain rows there:
// on the interleave the 16-row tiles streamed 20-30 % slower with 2 and 8 tokens on a Zen 4.)
void dot_q8_0_x8_avx512_vnni(const uint8_t* groups, size_t row_begin, size_t row_end,
                             const ActivationRows& x, float* y, size_t y_stride);

// ---- Q8_0's row-quad interleave (WeightLayout::kRowQuads8): per group of 8 rows, the blocks in
// column order, kQ8_0QuadBlockBytes each (8 rows x 34): the eight rows' f16 scales (row i at 2i),
// then the block's 32 quants as 8 quads, quad k (elements 4k .. 4k + 3) of row i at 16 + 32k + 4i —
// so one 32-byte load holds a quad of all eight rows, one row per 32-bit lane. Padding rows are
// zero. The AVX2 and AVX-512 VNNI kernels multiply each row's quad by the token's broadcast and
// never reduce across lanes (quant_dot_q8_0_quads_walk.h); the scalar one gathers the plain blocks
// back.
inline constexpr size_t kQ8_0QuadBlockBytes = 272;
void repack_q8_0_quads(const uint8_t* w, size_t row_bytes, size_t rows, uint8_t* groups);
void dot_q8_0_quads_scalar(const uint8_t* groups, size_t row_begin, size_t row_end,
                           const ActivationRows& x, float* y, size_t y_stride);
void dot_q8_0_quads_avx2(const uint8_t* groups, size_t row_begin, size_t row_end,
                         const ActivationRows& x, float* y, size_t y_stride);
// AVX-512 VNNI: the same tiles with one vpdpbusd per quad and token, up to 8 tokens a tile
// (quant_dot_q8_0_quads_avx512_vnni.cpp).
void dot_q8_0_quads_avx512_vnni(const uint8_t* groups, size_t row_begin, size_t row_end,
                                const ActivationRows& x, float* y, size_t y_stride);

// ---- MXFP4 x8: per group, the blocks in column order, 136 bytes each (8 rows x 17 bytes):
//  byte i (i < 8):                    row i's exponent e;
//  byte 8 + 32k + 4i + j (k, j < 4):  row i's quant byte 4k + j (low nibble: element 4k + j, high
//                                     nibble: element 16 + 4k + j).
// So the 8 exponents are one 8-byte load, and 32-bit lane i of the 32-byte load at 8 + 32k holds
// row i's elements 4k .. 4k+3 (low nibbles) and 16+4k .. 16+4k+3 (high nibbles): with the
// activation quants broadcast, each lane sums one row and no horizontal reduction is needed.
// Arithmetic: dot_mxfp4_scalar's, per row.
void repack_mxfp4_x8(const uint8_t* w, size_t row_bytes, size_t rows, uint8_t* groups);
void dot_mxfp4_x8_scalar(const uint8_t* groups, size_t row_begin, size_t row_end,
                         const ActivationRows& x, float* y, size_t y_stride);
void dot_mxfp4_x8_avx2(const uint8_t* groups, size_t row_begin, size_t row_end,
                       const ActivationRows& x, float* y, size_t y_stride);
// AVX-512 VNNI (callable only when matmul_variant_supported(kAvx512Vnni)): the AVX2 kernel's walk
// with vpdpbusd block sums.
void dot_mxfp4_x8_avx512_vnni(const uint8_t* groups, size_t row_begin, size_t row_end,
                              const ActivationRows& x, float* y, size_t y_stride);
// AMX-INT8 (callable only when matmul_variant_supported(kAmx)): TDPBSSD tiles of 16 tokens x 16
// rows (two groups) per block, bit-identical to dot_mxfp4_scalar; the rows outside whole group
// pairs and calls with few tokens run dot_mxfp4_x8_avx512_vnni.
void dot_mxfp4_x8_amx(const uint8_t* groups, size_t row_begin, size_t row_end,
                      const ActivationRows& x, float* y, size_t y_stride);

// ---- Q4_K x8: per group, the super-blocks in column order, 1152 bytes each (8 rows x 144, the
// rows' scales unpacked to one 6-bit value per (sub-block j, row i), entry e = 8j + i):
//  bytes 0 + 2i, 16 + 2i:             row i's fp16 d, dmin;
//  byte 32 + k, 64 + k (k < 32):      low 4 bits of scale (min) entry k in the low nibble, of
//                                     entry 32 + k in the high nibble;
//  byte 96 + k:                       the top 2 bits of scale entry k (bits 0-1), scale entry
//                                     32 + k (bits 2-3), min entry k (4-5), min entry 32 + k (6-7);
//  byte 128 + 32(8c + m) + 4i + j:    row i's quant byte 32c + 4m + j (c < 4, m < 8, j < 4): low
//                                     nibble = element 64c + 4m + j (sub-block 2c), high nibble
//                                     = element 64c + 32 + 4m + j (sub-block 2c + 1).
// So 32-bit lane i of the 32-byte load at 128 + 32(8c + m) holds row i's four quants of each of
// sub-blocks 2c and 2c + 1 at the same positions: with four activation quants broadcast, one
// dpbusd sums them for all eight rows, and the scales of sub-block j are one 8-byte row.
// Arithmetic: dot_q4_k_scalar's, per row.
void repack_q4_k_x8(const uint8_t* w, size_t row_bytes, size_t rows, uint8_t* groups);
void dot_q4_k_x8_scalar(const uint8_t* groups, size_t row_begin, size_t row_end,
                        const ActivationRows& x, float* y, size_t y_stride);
void dot_q4_k_x8_avx2(const uint8_t* groups, size_t row_begin, size_t row_end,
                      const ActivationRows& x, float* y, size_t y_stride);
// AVX-512 VNNI: 256-bit tiles for up to 3 tokens, two groups per 512-bit register from 4, and from
// 16 tokens 16 tokens per register against a group unpacked once per call
// (quant_dot_x8_lanes_avx512.h).
void dot_q4_k_x8_avx512_vnni(const uint8_t* groups, size_t row_begin, size_t row_end,
                             const ActivationRows& x, float* y, size_t y_stride);
// AMX-INT8 (+ AVX-512 VNNI; callable only when matmul_variant_supported(kAmx)): TDPBSUD tiles of
// 16 tokens x 16 rows (two groups) per sub-block, bit-identical to dot_q4_k_scalar; the rows
// outside whole group pairs and calls with few tokens run dot_q4_k_x8_avx512_vnni.
void dot_q4_k_x8_amx(const uint8_t* groups, size_t row_begin, size_t row_end,
                     const ActivationRows& x, float* y, size_t y_stride);

// ---- Q5_K x8: per group, the super-blocks in column order, 1408 bytes each (8 rows x 176): Q4_K
// x8's 128-byte header (d, dmin, the unpacked scales and mins), then per 64 elements c (c < 4) a
// 320-byte chunk in read order:
//  byte 128 + 320c + 32m + 4i + j:         row i's quant byte 32c + 4m + j (m < 8, j < 4), as in
//                                          Q4_K x8 (low nibble: element 64c + 4m + j, high nibble:
//                                          element 64c + 32 + 4m + j);
//  byte 128 + 320c + 256 + 32h + 4i + j:   bit k holds the fifth bit of row i's element
//                                          64c + 4m + j and bit 4 + k that of 64c + 32 + 4m + j,
//                                          for m = 4h + k (h < 2, k < 4).
// So one 32-byte load of fifth bits serves four quads; for quad m the bits sit at m % 4 and
// 4 + m % 4 of every byte. Arithmetic: dot_q5_k_scalar's, per row.
void repack_q5_k_x8(const uint8_t* w, size_t row_bytes, size_t rows, uint8_t* groups);
void dot_q5_k_x8_scalar(const uint8_t* groups, size_t row_begin, size_t row_end,
                        const ActivationRows& x, float* y, size_t y_stride);
void dot_q5_k_x8_avx2(const uint8_t* groups, size_t row_begin, size_t row_end,
                      const ActivationRows& x, float* y, size_t y_stride);
// AVX-512 VNNI: 256-bit tiles for up to 3 tokens, two groups per 512-bit register from 4, and from
// 16 tokens 16 tokens per register against a group unpacked once per call
// (quant_dot_x8_lanes_avx512.h).
void dot_q5_k_x8_avx512_vnni(const uint8_t* groups, size_t row_begin, size_t row_end,
                             const ActivationRows& x, float* y, size_t y_stride);

// ---- Q6_K x8: per group, the super-blocks in column order, 1680 bytes each (8 rows x 210), in the
// order the kernel reads them (scales, then one 384-byte chunk per 64 elements):
//  bytes 0 + 2i:                       row i's fp16 d;
//  byte 16 + 8g + i (g < 16):          row i's int8 scale of 16-element group g;
//  byte 144 + 384c + 32m + 4i + j:     the low 4 bits of row i's element 64c + 4m + j (c < 4,
//                                      m < 8, j < 4) in the low nibble, of element 64c + 32 + 4m
//                                      + j in the high nibble (as Q4_K x8's quants);
//  byte 400 + 384c + 32k + 4i + j:     the top 2 bits of row i's elements 64c + 8k + j (bits 0-1),
//                                      64c + 32 + 8k + j (2-3), 64c + 8k + 4 + j (4-5) and
//                                      64c + 32 + 8k + 4 + j (6-7) (k < 4).
// So the 32-byte loads at 144 + 384c + 32m and 400 + 384c + 32(m / 2) give, per 32-bit lane i, row
// i's four 6-bit quants of groups 4c + m / 4 and 4c + 2 + m / 4 at the same positions.
// Arithmetic: dot_q6_k_scalar's, per row.
void repack_q6_k_x8(const uint8_t* w, size_t row_bytes, size_t rows, uint8_t* groups);
void dot_q6_k_x8_scalar(const uint8_t* groups, size_t row_begin, size_t row_end,
                        const ActivationRows& x, float* y, size_t y_stride);
void dot_q6_k_x8_avx2(const uint8_t* groups, size_t row_begin, size_t row_end,
                      const ActivationRows& x, float* y, size_t y_stride);
// AVX-512 VNNI: 256-bit tiles for up to 3 tokens, two groups per 512-bit register from 4, and from
// 16 tokens 16 tokens per register against a group unpacked once per call
// (quant_dot_x8_lanes_avx512.h).
void dot_q6_k_x8_avx512_vnni(const uint8_t* groups, size_t row_begin, size_t row_end,
                             const ActivationRows& x, float* y, size_t y_stride);

// ---- BF16 weights x BF16 activations (the quantized mode's pairing for BF16 weights): the
// exception to the integer rules above. Each product of two bfloat16 values is exact in float32
// (8-bit significands); the scalar reference adds them in column order into one float sum from
// 0.0f. The SIMD variants sum in another order (lanes, pairs, then a reduction), so they match
// the reference within the float path's summation bound, not bit for bit; where the CPU has
// AVX512-BF16, vdpbf16ps also reads subnormal bfloat16 inputs as zero and flushes subnormal
// results (an absolute difference below 2^-126 per product). Each y element still depends only on
// its own rows, so any split over threads or tokens gives bit-identical results.
void dot_bf16_scalar(const uint8_t* w, size_t row_bytes, size_t rows, const ActivationRows& x,
                     float* y, size_t y_stride);
void dot_bf16_avx2(const uint8_t* w, size_t row_bytes, size_t rows, const ActivationRows& x,
                   float* y, size_t y_stride);
// vdpbf16ps where cpu_features().avx512_bf16, else dot_bf16_avx2.
void dot_bf16_avx512(const uint8_t* w, size_t row_bytes, size_t rows, const ActivationRows& x,
                     float* y, size_t y_stride);

// ---- F8_E4M3_B128 weights (kernels/tensor_type.h: per 128 columns a float32 scale, then 128 E4M3
// codes) x BF16 activations (the quantized mode's pairing): per block b, in column order,
// s_b += fp8_e4m3_to_fp32(code) * x (each product exact: 4-bit by 8-bit significands), then
// sum += s_b * scale_b, blocks in order from 0.0f. The SIMD variants match it within the float
// path's summation bound, as the BF16 ones (dot_bf16_scalar above); rows are whole blocks (the
// converter refuses any other shape). Any split over threads gives bit-identical results.
void dot_f8_b128_scalar(const uint8_t* w, size_t row_bytes, size_t rows, const ActivationRows& x,
                        float* y, size_t y_stride);
// Many tokens through the float-path tiles of the table k (to_float once per call, dot_rows):
// the SIMD variants' choice from a few tokens on.
void dot_f8_b128_converted(const MatmulKernels& k, const uint8_t* w, size_t row_bytes, size_t rows,
                           const ActivationRows& x, float* y, size_t y_stride);
// Codes through the fp16 route (float_convert.h: exact), times scale * 2^8, FMA with the
// widened activations; from 8 tokens dot_f8_b128_converted on the AVX2 table.
void dot_f8_b128_avx2(const uint8_t* w, size_t row_bytes, size_t rows, const ActivationRows& x,
                      float* y, size_t y_stride);
// Where cpu_features() has AVX512-BF16 and AVX512-VBMI: codes to bfloat16 (exact) by two 128-entry
// vpermi2b byte lookups per 64 codes, vdpbf16ps per block, the block sum times its scale, up to
// 31 tokens, dot_f8_b128_converted on the AVX-512 table from 32; else dot_f8_b128_avx2.
void dot_f8_b128_avx512(const uint8_t* w, size_t row_bytes, size_t rows, const ActivationRows& x,
                        float* y, size_t y_stride);

}  // namespace tandem::kernels::detail
