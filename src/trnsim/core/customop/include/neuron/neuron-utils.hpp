// Which GpSimd core runs this call of a custom operator, and how many run it (8 with multicore=True, else 1).
#pragma once
#include <trnsim/customop.h>

inline uint32_t get_cpu_id() { return trnsim::ctx().cpu_id; }
inline uint32_t get_cpu_count() { return trnsim::ctx().cpu_count; }
