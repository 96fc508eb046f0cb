// The CUDA emulation's built-in vector types (CUDA's vector_types.h, in the global namespace as
// there): dim3 and uint3 for launch shapes and thread coordinates, float4 and uint4 for the
// kernels' 16-byte loads.
#pragma once

struct uint3 {
  unsigned x, y, z;
};

struct dim3 {
  unsigned x = 1, y = 1, z = 1;
  constexpr dim3(unsigned vx = 1, unsigned vy = 1, unsigned vz = 1) : x(vx), y(vy), z(vz) {}
};

struct alignas(16) float4 {
  float x, y, z, w;
};

struct alignas(16) uint4 {
  unsigned x, y, z, w;
};
