// Run-time choice of the CPU matmul kernels (scalar reference, AVX2, AVX-512, AVX-512 VNNI, AMX).
#pragma once

#include <array>
#include <string_view>

namespace tandem::kernels {

// The instruction-set variants of matmul_rows / matmul_rows_q8_0 (matmul.h).
//  kScalar:     the portable reference; any CPU.
//  kAvx2:       AVX2 + FMA + F16C.
//  kAvx512:     AVX-512 F + BW + VL (plus the AVX2 set).
//  kAvx512Vnni: kAvx512 on a CPU with AVX-512 VNNI (the int8 kernels of weight_type_table.h).
//  kAmx:        kAvx512Vnni on a CPU with AMX-TILE and AMX-INT8 that the OS lets this process use
//               (cpu_features()): the int8 tile kernels for many tokens (prefill), the
//               kAvx512Vnni kernels elsewhere.
enum class MatmulVariant { kScalar, kAvx2, kAvx512, kAvx512Vnni, kAmx };

// Every variant, in the enum's order (the order of fall-backs, see matmul_variant_for_setting).
inline constexpr std::array kMatmulVariants = {MatmulVariant::kScalar, MatmulVariant::kAvx2,
                                               MatmulVariant::kAvx512, MatmulVariant::kAvx512Vnni,
                                               MatmulVariant::kAmx};

// "scalar", "avx2", "avx512", "avx512-vnni", "amx".
std::string_view matmul_variant_name(MatmulVariant v);

// Whether this CPU (and OS, see cpu_features()) can run v. kScalar always can.
bool matmul_variant_supported(MatmulVariant v);

// The best variant this CPU supports.
MatmulVariant best_matmul_variant();

// The variant matmul uses now: the best supported one until select_matmul_kernels or
// set_matmul_variant chooses another. Thread-safe. (The kernels read no environment: tandemd's
// runtime.cpu_kernels and the CLI's TANDEM_CPU_KERNELS come through select_matmul_kernels.)
MatmulVariant active_matmul_variant();

// The variant a setting names on this CPU (nullptr: unset, the best): "scalar", "avx2",
// "avx512" (the best AVX-512 variant without AMX), "amx". A name the CPU cannot run falls back to
// the best supported variant at or below it (amx -> avx512 -> avx2 -> scalar); an unknown name
// gives the best variant.
// Pure apart from reading cpu_features().
MatmulVariant matmul_variant_for_setting(const char* setting);

// Makes the variant `setting` names (as matmul_variant_for_setting; "" or "auto": the best)
// the active one and returns it. A fall-back or an unknown name is logged as a warning naming
// `source` (the configuration key or environment variable the setting came from). Main thread,
// before any matmul runs (as set_matmul_variant).
MatmulVariant select_matmul_kernels(std::string_view setting, std::string_view source);

// Name of the active variant, for the startup banner.
std::string_view active_matmul_variant_name();

// Forces a variant (tests, benchmarks, select_matmul_kernels); an unsupported one
// falls back as above. Returns the variant actually selected. Must not race with running matmul
// calls (a call in flight may finish with either variant): switch between calls only.
MatmulVariant set_matmul_variant(MatmulVariant v);

}  // namespace tandem::kernels
