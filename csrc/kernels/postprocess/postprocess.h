// Detection post-processing in the model's own number domain: top-k of int8 logits,
// score thresholds compared on raw (int8 or float) values, SSD / BlazeFace anchor
// decoding of only the anchors that pass, and hard or weighted non-maximum suppression.
//
// Portable C++ only: the work is branchy and small (hundreds of anchors), so the gain
// over numpy comes from touching each value once, not from vector instructions.
#pragma once

#include <cstddef>
#include <cstdint>
#include <vector>

namespace edgeinf::post {

// Indices of the k largest values of each row, largest first, ties by lower index.
void top_k_qs8(const int8_t* x, size_t rows, size_t n, size_t k, int64_t* indices, int8_t* values);
void top_k_f32(const float* x, size_t rows, size_t n, size_t k, int64_t* indices, float* values);

// How the regressor values of one anchor map to a box (MediaPipe's
// TensorsToDetectionsCalculator with reverse_output_order: x, y, w, h, then keypoints).
struct DecodeParams {
  size_t num_coords;                         // values per anchor (16 for BlazeFace)
  size_t num_keypoints;                      // (x, y) pairs after the box (6)
  float x_scale, y_scale, w_scale, h_scale;  // 128 for the short-range face model
  float score_clip;                          // raw scores are clipped to [-clip, clip] before the sigmoid
  bool sigmoid;                              // scores are logits
};

// Raw values as float32, or int8 with their scale and zero point.
struct Raw {
  const float* f32 = nullptr;
  const int8_t* q8 = nullptr;
  float scale = 1.0f;
  int32_t zero_point = 0;
  float at(size_t i) const {
    return f32 ? f32[i] : scale * static_cast<float>(static_cast<int32_t>(q8[i]) - zero_point);
  }
};

// One decoded detection: box (xmin, ymin, xmax, ymax), keypoints (x, y), score.
struct Detections {
  std::vector<float> boxes;      // [m][4]
  std::vector<float> keypoints;  // [m][num_keypoints][2]
  std::vector<float> scores;     // [m]
  std::vector<int64_t> anchor;   // [m] index of the anchor each came from
  size_t size() const { return scores.size(); }
};

// Decodes the anchors whose raw score passes: int8 scores compare q >= q_threshold,
// float scores compare raw >= raw_threshold (both precomputed from the probability
// threshold); only those anchors are dequantized, decoded and given a sigmoid.
// anchors: [n][4] as (x_center, y_center, w, h).
Detections decode(const Raw& boxes, const Raw& scores, const float* anchors, size_t n, const DecodeParams& p,
                  float raw_threshold, int32_t q_threshold);

// Greedy NMS over scores (descending, ties by lower index). Hard: keep the best box of
// each overlapping group. Weighted (MediaPipe's WEIGHTED): the best detection's box and
// keypoints become the score-weighted mean of every remaining detection overlapping it
// with IoU > iou_threshold (itself included); its score stays.
Detections non_max_suppression(const Detections& in, size_t num_keypoints, float iou_threshold, bool weighted,
                               size_t max_detections);

float iou(const float* a, const float* b);

}  // namespace edgeinf::post
