// edgeinf._C post-processing family: top-k, SSD decoding with quantized-domain score
// thresholds, hard / weighted NMS. Validation first, then the work without the GIL.
#include <pybind11/numpy.h>
#include <pybind11/pybind11.h>

#include <cmath>
#include <string>
#include <type_traits>

#include "../kernels/postprocess/postprocess.h"
#include "../size_math.h"
#include "bindings.h"
#include "quant_arrays.h"

namespace py = pybind11;

namespace edgeinf::bindings {
namespace {

// Anchor indices are kept as 32-bit values by the decoder.
constexpr size_t kMaxAnchors = size_t{1} << 31;
// Coordinates per anchor: a box and its keypoints (BlazeFace has 16, SSD heads a few dozen).
// The outputs are sized by it even when no anchor passes, so it is bounded like a size.
constexpr size_t kMaxCoords = 4096;

template <class T>
py::array_t<T> to_array(const std::vector<T>& v, std::vector<py::ssize_t> shape) {
  py::array_t<T> a(shape);
  if (!v.empty()) std::copy(v.begin(), v.end(), a.mutable_data());
  return a;
}

py::dict to_dict(const post::Detections& d, size_t nk) {
  const auto m = static_cast<py::ssize_t>(d.size());
  py::dict out;
  out["boxes"] = to_array(d.boxes, {m, 4});
  out["keypoints"] = to_array(d.keypoints, {m, static_cast<py::ssize_t>(nk), 2});
  out["scores"] = to_array(d.scores, {m});
  out["anchors"] = to_array(d.anchor, {m});
  return out;
}

post::Raw raw_of(const py::array& a, float scale, int32_t zero_point, const char* what) {
  post::Raw r;
  if (a.dtype().is(py::dtype::of<float>())) {
    r.f32 = checked_data<float>(a, what);
  } else if (a.dtype().is(py::dtype::of<int8_t>())) {
    r.q8 = checked_data<int8_t>(a, what);
    check_scale(scale, what);
    check_int8_zero_point(zero_point, what);
    r.scale = scale;
    r.zero_point = zero_point;
  } else {
    throw std::invalid_argument(std::string(what) + ": expected dtype float32 or int8, got " +
                                std::string(py::str(a.dtype())));
  }
  return r;
}

post::Detections decode_checked(const py::array& boxes, const py::array& scores, const py::array& anchors,
                                const post::DecodeParams& p, float raw_threshold, int32_t q_threshold, float box_scale,
                                int32_t box_zero_point, float score_scale, int32_t score_zero_point) {
  const float* pa = checked_data<float>(anchors, "anchors");
  check_ndim(anchors, "anchors", 2);
  if (anchors.shape(1) != 4) throw std::invalid_argument("anchors: expected shape (n, 4), got " + shape_str(anchors));
  const size_t n = static_cast<size_t>(anchors.shape(0));
  if (n > kMaxAnchors) {
    throw std::invalid_argument("anchors: at most " + std::to_string(kMaxAnchors) + " anchors, got " +
                                std::to_string(n));
  }
  if (p.num_coords > kMaxCoords) {
    throw std::invalid_argument("num_coords: at most " + std::to_string(kMaxCoords) + " per anchor, got " +
                                std::to_string(p.num_coords));
  }
  // Both products are checked: a wrapped one could match a small buffer.
  if (p.num_keypoints > p.num_coords / 2 || p.num_coords < 4 + 2 * p.num_keypoints) {
    throw std::invalid_argument("num_coords " + std::to_string(p.num_coords) + " cannot hold a box and " +
                                std::to_string(p.num_keypoints) + " keypoints");
  }
  if (static_cast<size_t>(boxes.size()) != mul_size(n, p.num_coords, "boxes (anchors x num_coords)")) {
    throw std::invalid_argument("boxes: expected " + std::to_string(n) + " x " + std::to_string(p.num_coords) +
                                " values (anchors x coordinates), got shape " + shape_str(boxes));
  }
  if (static_cast<size_t>(scores.size()) != n) {
    throw std::invalid_argument("scores: expected " + std::to_string(n) + " values (one per anchor), got shape " +
                                shape_str(scores));
  }
  for (float s : {p.x_scale, p.y_scale, p.w_scale, p.h_scale}) {
    if (!(s > 0) || !std::isfinite(s))
      throw std::invalid_argument("box scales must be positive and finite, got " + std::to_string(s));
  }
  const post::Raw rb = raw_of(boxes, box_scale, box_zero_point, "boxes");
  const post::Raw rs = raw_of(scores, score_scale, score_zero_point, "scores");
  py::gil_scoped_release release;
  return post::decode(rb, rs, pa, n, p, raw_threshold, q_threshold);
}

// Decode + NMS with every parameter fixed at construction: a call passes only the two
// output arrays (a detector keeps one for its frames; decode_ssd makes one per call).
class Decoder {
 public:
  Decoder(const py::array& anchors, const post::DecodeParams& p, float raw_threshold, int32_t q_threshold,
          float box_scale, int32_t box_zero_point, float score_scale, int32_t score_zero_point, float iou_threshold,
          int nms, size_t max_detections)
      : anchors_(py::reinterpret_borrow<py::array>(anchors)),
        p_(p),
        raw_threshold_(raw_threshold),
        q_threshold_(q_threshold),
        box_scale_(box_scale),
        box_zero_point_(box_zero_point),
        score_scale_(score_scale),
        score_zero_point_(score_zero_point),
        iou_threshold_(iou_threshold),
        nms_(nms),
        max_detections_(max_detections) {
    if (nms < 0 || nms > 2) throw std::invalid_argument("nms must be 0 (none), 1 (hard) or 2 (weighted)");
    checked_data<float>(anchors_, "anchors");
  }

  py::tuple operator()(const py::array& boxes, const py::array& scores) const {
    post::Detections d = decode_checked(boxes, scores, anchors_, p_, raw_threshold_, q_threshold_, box_scale_,
                                        box_zero_point_, score_scale_, score_zero_point_);
    if (nms_) {
      py::gil_scoped_release release;
      d = post::non_max_suppression(d, p_.num_keypoints, iou_threshold_, nms_ == 2, max_detections_);
    }
    const auto m = static_cast<py::ssize_t>(d.size());
    return py::make_tuple(to_array(d.boxes, {m, 4}),
                          to_array(d.keypoints, {m, static_cast<py::ssize_t>(p_.num_keypoints), 2}),
                          to_array(d.scores, {m}), to_array(d.anchor, {m}));
  }

 private:
  py::array anchors_;
  post::DecodeParams p_;
  float raw_threshold_;
  int32_t q_threshold_;
  float box_scale_;
  int32_t box_zero_point_;
  float score_scale_;
  int32_t score_zero_point_;
  float iou_threshold_;
  int nms_;
  size_t max_detections_;
};

}  // namespace

void bind_postprocess(py::module_& m) {
  py::class_<Decoder>(m, "DetectionDecoder")
      .def(py::init([](const py::array& anchors, size_t num_coords, size_t num_keypoints, float x_scale, float y_scale,
                       float w_scale, float h_scale, float score_clip, bool sigmoid, float raw_threshold,
                       int32_t q_threshold, float box_scale, int32_t box_zero_point, float score_scale,
                       int32_t score_zero_point, float iou_threshold, int nms, size_t max_detections) {
             const post::DecodeParams p{num_coords, num_keypoints, x_scale,    y_scale,
                                        w_scale,    h_scale,       score_clip, sigmoid};
             return Decoder(anchors, p, raw_threshold, q_threshold, box_scale, box_zero_point, score_scale,
                            score_zero_point, iou_threshold, nms, max_detections);
           }),
           py::arg("anchors"), py::arg("num_coords"), py::arg("num_keypoints"), py::arg("x_scale"), py::arg("y_scale"),
           py::arg("w_scale"), py::arg("h_scale"), py::arg("score_clip"), py::arg("sigmoid"), py::arg("raw_threshold"),
           py::arg("q_threshold"), py::arg("box_scale"), py::arg("box_zero_point"), py::arg("score_scale"),
           py::arg("score_zero_point"), py::arg("iou_threshold"), py::arg("nms"), py::arg("max_detections"))
      .def("__call__", &Decoder::operator(), py::arg("boxes"), py::arg("scores"));

  m.def(
      "top_k",
      [](const py::array& x, size_t k) -> py::tuple {
        if (x.ndim() < 1) throw std::invalid_argument("x: expected at least 1 dimension, got a scalar");
        const size_t n = static_cast<size_t>(x.shape(x.ndim() - 1));
        if (k < 1 || k > n)
          throw std::invalid_argument("k must be in [1, " + std::to_string(n) + "], got " + std::to_string(k));
        const size_t rows = static_cast<size_t>(x.size()) / n;
        std::vector<py::ssize_t> shape(x.shape(), x.shape() + x.ndim());
        shape.back() = static_cast<py::ssize_t>(k);
        py::array_t<int64_t> idx(shape);
        // indices and values of one element type T, by that type's kernel
        auto select = [&](auto kernel, auto* px) {
          using T = std::remove_const_t<std::remove_pointer_t<decltype(px)>>;
          py::array_t<T> val(shape);
          int64_t* pi = idx.mutable_data();
          T* pv = val.mutable_data();
          {
            py::gil_scoped_release release;
            kernel(px, rows, n, k, pi, pv);
          }
          return py::make_tuple(idx, val);
        };
        if (x.dtype().is(py::dtype::of<int8_t>())) return select(post::top_k_qs8, checked_data<int8_t>(x, "x"));
        return select(post::top_k_f32, checked_data<float>(x, "x (int8 or float32)"));
      },
      py::arg("x"), py::arg("k"));

  m.def(
      "non_max_suppression",
      [](const py::array& boxes, const py::array& keypoints, const py::array& scores, float iou_threshold,
         bool weighted, size_t max_detections) {
        const float* pb = checked_data<float>(boxes, "boxes");
        const float* pk = checked_data<float>(keypoints, "keypoints");
        const float* ps = checked_data<float>(scores, "scores");
        check_ndim(boxes, "boxes", 2);
        const size_t m = static_cast<size_t>(boxes.shape(0));
        check_shape(boxes, "boxes", {static_cast<py::ssize_t>(m), 4});
        check_shape(scores, "scores", {static_cast<py::ssize_t>(m)});
        if (keypoints.ndim() != 3 || static_cast<size_t>(keypoints.shape(0)) != m || keypoints.shape(2) != 2) {
          throw std::invalid_argument("keypoints: expected shape (" + std::to_string(m) + ", k, 2), got " +
                                      shape_str(keypoints));
        }
        if (!(iou_threshold >= 0.0f) || iou_threshold > 1.0f) {
          throw std::invalid_argument("iou_threshold must be in [0, 1], got " + std::to_string(iou_threshold));
        }
        const size_t nk = static_cast<size_t>(keypoints.shape(1));
        post::Detections d;
        d.boxes.assign(pb, pb + 4 * m);
        d.keypoints.assign(pk, pk + 2 * nk * m);
        d.scores.assign(ps, ps + m);
        d.anchor.resize(m);
        for (size_t i = 0; i < m; ++i) d.anchor[i] = static_cast<int64_t>(i);
        {
          py::gil_scoped_release release;
          d = post::non_max_suppression(d, nk, iou_threshold, weighted, max_detections);
        }
        return to_dict(d, nk);
      },
      py::arg("boxes"), py::arg("keypoints"), py::arg("scores"), py::arg("iou_threshold"), py::arg("weighted"),
      py::arg("max_detections") = static_cast<size_t>(-1));
}

}  // namespace edgeinf::bindings
