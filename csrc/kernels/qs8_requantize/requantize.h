// int8 requantization of int32 accumulators as a kernel of its own (the arithmetic and
// its parameters are in quant/requantization.h, shared by every int8 kernel).
#pragma once

#include <cstddef>
#include <cstdint>

#include "../../quant/requantization.h"

namespace edgeinf::qs8 {

// out[r][c] = requantize(acc[r][c]) for `rows` rows of `channels` accumulators; channel
// c uses rq's entry c (rq.channels() >= channels; per-tensor parameters are replicated).
void qs8_requantize__scalar(const int32_t* acc, int8_t* out, size_t rows, size_t channels, const Requantization& rq);
void qs8_requantize__avx2(const int32_t* acc, int8_t* out, size_t rows, size_t channels, const Requantization& rq);
void qs8_requantize__neon(const int32_t* acc, int8_t* out, size_t rows, size_t channels, const Requantization& rq);
void qs8_requantize(const int32_t* acc, int8_t* out, size_t rows, size_t channels, const Requantization& rq);

}  // namespace edgeinf::qs8
