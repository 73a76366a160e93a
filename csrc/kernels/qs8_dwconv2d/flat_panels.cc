// The flat panels of DwWeights (dwconv2d.h): per lane, the weights and requantization
// parameters of the channel that the lane holds.
#include <numeric>

#include "dwconv2d.h"

namespace edgeinf::qs8 {

void DwWeights::pack_flat_panels() {
  const size_t count = channels_, taps = k_h_ * k_w_, groups = flat_tap_groups();
  if (count >= 16) return;
  const size_t panels = count / std::gcd(count, size_t{64});
  const size_t blocks = padded_ / 16;
  // Channel c's lane in the AVX2 parameters (its float form is taken from there).
  auto avx2_param = [&](size_t c, RqParam k) {
    size_t base = c / 16 * 16, block = c / 16;
    if (overlap_last_ && block + 1 >= blocks) {
      block = blocks - 1;
      base = count - 16;
    }
    const size_t j = c - base;  // unpack_lane_channel(h, i) == j
    return avx2_params_[(block * kRqParams + k) * 16 + (j / 4 % 2) * 8 + (j / 8) * 4 + j % 4];
  };
  // The channel of lane m of accumulator k in panel q.
  auto channel_at = [&](size_t q, size_t k, size_t m) { return (q * 64 + m / 4 * 16 + k * 4 + m % 4) % count; };
  flat_weights_.assign(panels * groups * 4 * 64, 0);
  flat_params_.assign(panels * kRqParams * 64, 0);
  for (size_t q = 0; q < panels; ++q) {
    for (size_t k = 0; k < 4; ++k) {
      for (size_t m = 0; m < 16; ++m) {
        const size_t c = channel_at(q, k, m), c_odd = channel_at(q, k, m | 1);
        uint32_t weight_sum = 0;
        for (size_t t = 0; t < taps; ++t) {
          const int8_t v = w_[t * count + c];
          weight_sum += static_cast<uint32_t>(int32_t{v});
          flat_weights_[((q * groups + t / 4) * 4 + k) * 64 + m * 4 + t % 4] = v;
        }
        const int32_t rs = rq_.right_shift[c];
        const int32_t values[kRqParams] = {
            static_cast<int32_t>(static_cast<uint32_t>(bias_zp_[c]) - 128u * weight_sum),
            rq_.multiplier[c],
            rq_.multiplier[c_odd],
            rq_.left_shift[c],
            rs,
            static_cast<int32_t>((int64_t{1} << rs) >> 1),
            avx2_param(c, kRqScale),
            avx2_param(c, kRqOffset),
            avx2_param(c, kRqOffsetNeg),
        };
        for (size_t p = 0; p < kRqParams; ++p) flat_params_[((q * kRqParams + p) * 4 + k) * 16 + m] = values[p];
        flat_left_shifts_ = flat_left_shifts_ || rq_.left_shift[c] != 0;
      }
    }
  }
  flat_panels_ = panels;
}

}  // namespace edgeinf::qs8
