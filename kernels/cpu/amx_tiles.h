// AMX tile plumbing for the kernel files built with -mamx-tile (quant_dot_*_amx.cpp): the
// tile configuration record, the tile loads and stores the compiler may not move memory accesses
// across, and the per-call configuration state. Everything here has internal linkage.
//
// Why not GCC 12's intrinsics as they are: its _tile_loadd asm names no memory operand, so the
// compiler may sink or drop the stores that filled the buffer a tile is loaded from (it sees no
// reader), and _tile_loadconfig declares only the configuration's first 8 bytes as read, so
// stores to the rest of a configuration built on the stack are dropped (what crashes llama.cpp
// 0.5.0's AMX path when built with GCC 12). Here loads and stores clobber memory, and the
// configurations are constant data in static storage, loaded with an operand covering all 64
// bytes.
#pragma once

#include <cstddef>
#include <cstdint>

// Tile numbers must be literals (the instruction encodes them), so these are macros.
#define TANDEM_TILE_LOAD(tile, base, stride)                                             \
  __asm__ volatile("tileloadd (%0,%1,1), %%tmm" #tile                                    \
                   :                                                                     \
                   : "r"(static_cast<const void*>(base)), "r"(static_cast<long>(stride)) \
                   : "memory")
#define TANDEM_TILE_STORE(tile, base, stride)                                      \
  __asm__ volatile("tilestored %%tmm" #tile ", (%0,%1,1)"                          \
                   :                                                               \
                   : "r"(static_cast<void*>(base)), "r"(static_cast<long>(stride)) \
                   : "memory")
#define TANDEM_TILE_ZERO(tile) __asm__ volatile("tilezero %%tmm" #tile ::)
// dst += src1 (signed bytes) x src2 (unsigned bytes, the VNNI "B" order), int32.
#define TANDEM_TILE_DPBSUD(dst, src1, src2) \
  __asm__ volatile("tdpbsud %%tmm" #src2 ", %%tmm" #src1 ", %%tmm" #dst ::)
// dst += src1 (signed bytes) x src2 (signed bytes, the VNNI "B" order), int32.
#define TANDEM_TILE_DPBSSD(dst, src1, src2) \
  __asm__ volatile("tdpbssd %%tmm" #src2 ", %%tmm" #src1 ", %%tmm" #dst ::)

namespace tandem::kernels::detail {
namespace {

// LDTILECFG's 64-byte record (palette 1): per tile its bytes per row and its rows.
struct alignas(64) TileConfig {
  uint8_t palette;
  uint8_t start_row;
  uint8_t reserved[14];
  uint16_t colsb[16];
  uint8_t rows[16];
};
static_assert(sizeof(TileConfig) == 64);

// Keeps one of a kernel's static configurations loaded (LDTILECFG only when it changes) and
// releases the tiles when the call that owns it returns.
class TileState {
 public:
  TileState() = default;
  TileState(const TileState&) = delete;
  TileState& operator=(const TileState&) = delete;
  ~TileState() {
    if (loaded_ != nullptr) __asm__ volatile("tilerelease" ::);
  }

  void use(const TileConfig& config) {
    if (&config == loaded_) return;
    __asm__ volatile("ldtilecfg %0" : : "m"(config));
    loaded_ = &config;
  }

 private:
  const TileConfig* loaded_ = nullptr;
};

}  // namespace
}  // namespace tandem::kernels::detail
