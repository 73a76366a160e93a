// Post-processing: top-k, threshold-first SSD decoding, hard and weighted NMS.
#include <algorithm>
#include <cmath>
#include <numeric>

#include "postprocess.h"

namespace edgeinf::post {

void top_k_qs8(const int8_t* x, size_t rows, size_t n, size_t k, int64_t* indices, int8_t* values) {
  // Counting sort on the 256 possible values: O(n) per row, stable in the index.
  std::vector<size_t> start(257);
  for (size_t r = 0; r < rows; ++r) {
    const int8_t* row = x + r * n;
    size_t count[256] = {0};
    for (size_t i = 0; i < n; ++i) ++count[127 - row[i]];  // bucket 0 holds the largest value
    start[0] = 0;
    for (int b = 0; b < 256; ++b) start[b + 1] = start[b] + count[b];
    int64_t* idx = indices + r * k;
    for (size_t i = 0; i < n; ++i) {
      const size_t slot = start[127 - row[i]]++;
      if (slot < k) idx[slot] = static_cast<int64_t>(i);
    }
    for (size_t j = 0; j < k; ++j) values[r * k + j] = row[idx[j]];
  }
}

void top_k_f32(const float* x, size_t rows, size_t n, size_t k, int64_t* indices, float* values) {
  std::vector<int64_t> order(n);
  for (size_t r = 0; r < rows; ++r) {
    const float* row = x + r * n;
    std::iota(order.begin(), order.end(), int64_t{0});
    // NaN sorts last; equal values by lower index.
    auto before = [row](int64_t a, int64_t b) {
      const float va = row[a], vb = row[b];
      const bool na = va != va, nb = vb != vb;
      if (na != nb) return nb;
      if (!na && va != vb) return va > vb;
      return a < b;
    };
    std::partial_sort(order.begin(), order.begin() + static_cast<ptrdiff_t>(k), order.end(), before);
    for (size_t j = 0; j < k; ++j) {
      indices[r * k + j] = order[j];
      values[r * k + j] = row[order[j]];
    }
  }
}

namespace {

// Appends the indices i with x[i] >= threshold (none when `none`). Blocks of 32 are
// first tested as a whole, a comparison the compiler turns into vector code, so a
// frame whose anchors nearly all fail costs a fraction of a branch per anchor.
template <class T>
void collect_passing(const T* x, size_t n, T threshold, bool none, std::vector<uint32_t>* pass) {
  if (none) return;
  constexpr size_t kBlock = 32;
  size_t i = 0;
  for (; i + kBlock <= n; i += kBlock) {
    int any = 0;
    for (size_t j = 0; j < kBlock; ++j) any |= x[i + j] >= threshold;
    if (!any) continue;
    for (size_t j = 0; j < kBlock; ++j) {
      if (x[i + j] >= threshold) pass->push_back(static_cast<uint32_t>(i + j));
    }
  }
  for (; i < n; ++i) {
    if (x[i] >= threshold) pass->push_back(static_cast<uint32_t>(i));
  }
}

}  // namespace

Detections decode(const Raw& boxes, const Raw& scores, const float* anchors, size_t n, const DecodeParams& p,
                  float raw_threshold, int32_t q_threshold) {
  // First the anchors that pass, in one tight loop per score type (most anchors of a
  // frame fail the threshold, so this scan is nearly all of the work); then only those
  // are decoded, into outputs sized once.
  std::vector<uint32_t> pass;
  pass.reserve(64);
  if (scores.q8) {
    collect_passing(scores.q8, n, static_cast<int8_t>(std::clamp(q_threshold, -128, 127)), q_threshold > 127, &pass);
  } else {
    collect_passing(scores.f32, n, raw_threshold, false, &pass);
  }
  const size_t m = pass.size(), nk = p.num_keypoints;
  Detections out;
  out.boxes.resize(4 * m);
  out.keypoints.resize(2 * nk * m);
  out.scores.resize(m);
  out.anchor.resize(m);
  for (size_t j = 0; j < m; ++j) {
    const size_t i = pass[j];
    float s = scores.at(i);
    if (p.sigmoid) {
      s = std::min(std::max(s, -p.score_clip), p.score_clip);
      s = 1.0f / (1.0f + std::exp(-s));
    }
    const float* a = anchors + 4 * i;  // x_center, y_center, w, h
    const size_t base = i * p.num_coords;
    const float xc = boxes.at(base + 0) / p.x_scale * a[2] + a[0];
    const float yc = boxes.at(base + 1) / p.y_scale * a[3] + a[1];
    const float w = boxes.at(base + 2) / p.w_scale * a[2];
    const float h = boxes.at(base + 3) / p.h_scale * a[3];
    float* box = &out.boxes[4 * j];
    box[0] = xc - w / 2;
    box[1] = yc - h / 2;
    box[2] = xc + w / 2;
    box[3] = yc + h / 2;
    float* kp = out.keypoints.data() + 2 * nk * j;
    for (size_t k = 0; k < nk; ++k) {
      kp[2 * k] = boxes.at(base + 4 + 2 * k) / p.x_scale * a[2] + a[0];
      kp[2 * k + 1] = boxes.at(base + 5 + 2 * k) / p.y_scale * a[3] + a[1];
    }
    out.scores[j] = s;
    out.anchor[j] = static_cast<int64_t>(i);
  }
  return out;
}

float iou(const float* a, const float* b) {
  const float x0 = std::max(a[0], b[0]), y0 = std::max(a[1], b[1]);
  const float x1 = std::min(a[2], b[2]), y1 = std::min(a[3], b[3]);
  const float inter = std::max(x1 - x0, 0.0f) * std::max(y1 - y0, 0.0f);
  const float uni = (a[2] - a[0]) * (a[3] - a[1]) + (b[2] - b[0]) * (b[3] - b[1]) - inter;
  return uni > 0 ? inter / uni : 0.0f;
}

Detections non_max_suppression(const Detections& in, size_t nk, float iou_threshold, bool weighted,
                               size_t max_detections) {
  const size_t m = in.size();
  std::vector<size_t> remaining(m);
  std::iota(remaining.begin(), remaining.end(), size_t{0});
  std::stable_sort(remaining.begin(), remaining.end(), [&](size_t a, size_t b) { return in.scores[a] > in.scores[b]; });
  Detections out;
  out.boxes.reserve(4 * m);
  out.keypoints.reserve(2 * nk * m);
  out.scores.reserve(m);
  out.anchor.reserve(m);
  std::vector<size_t> rest;
  rest.reserve(m);
  std::vector<float> sum_kp(2 * nk);
  while (!remaining.empty() && out.size() < max_detections) {
    const size_t top = remaining.front();
    const float* box = &in.boxes[4 * top];
    float sum_box[4] = {0, 0, 0, 0}, total = 0;
    std::fill(sum_kp.begin(), sum_kp.end(), 0.0f);
    rest.clear();
    for (size_t j : remaining) {
      const bool overlaps = j == top || iou(&in.boxes[4 * j], box) > iou_threshold;
      if (!overlaps) {
        rest.push_back(j);
        continue;
      }
      if (weighted) {
        const float s = in.scores[j];
        total += s;
        for (int c = 0; c < 4; ++c) sum_box[c] += in.boxes[4 * j + c] * s;
        for (size_t c = 0; c < 2 * nk; ++c) sum_kp[c] += in.keypoints[2 * nk * j + c] * s;
      }
    }
    if (weighted && total > 0) {
      for (int c = 0; c < 4; ++c) out.boxes.push_back(sum_box[c] / total);
      for (size_t c = 0; c < 2 * nk; ++c) out.keypoints.push_back(sum_kp[c] / total);
    } else {
      out.boxes.insert(out.boxes.end(), box, box + 4);
      out.keypoints.insert(out.keypoints.end(), in.keypoints.begin() + 2 * nk * top,
                           in.keypoints.begin() + 2 * nk * (top + 1));
    }
    out.scores.push_back(in.scores[top]);
    out.anchor.push_back(in.anchor[top]);
    remaining.swap(rest);
  }
  return out;
}

}  // namespace edgeinf::post
