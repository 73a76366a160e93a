// edgeinf._C.warp_affine: an 8-bit image's affine crop straight into a float32 tensor
// (kernels/u8_image_to_tensor/warp_affine.h), with the GIL released. The face mesh stage
// (edgeinf/pipeline/face.py) crops each face's rotated square with it.
#include <pybind11/numpy.h>
#include <pybind11/stl.h>

#include <algorithm>
#include <array>
#include <climits>
#include <cstdint>
#include <stdexcept>
#include <string>

#include "../kernels/u8_image_to_tensor/warp_affine.h"
#include "bindings.h"

namespace py = pybind11;

namespace edgeinf::bindings {
namespace {

std::string shape_str(const py::array& a) {
  std::string s = "(";
  for (py::ssize_t i = 0; i < a.ndim(); ++i) s += (i ? ", " : "") + std::to_string(a.shape(i));
  return s + (a.ndim() == 1 ? ",)" : ")");
}

void warp_affine(const py::array& image, const py::array& out, const std::array<double, 6>& matrix,
                 const std::array<int, 3>& index, const std::array<float, 3>& scale, const std::array<float, 3>& bias) {
  if (!py::isinstance<py::array_t<uint8_t>>(image) || (image.ndim() != 2 && image.ndim() != 3))
    throw std::invalid_argument("image must be an HxW or HxWxC uint8 array, got " + shape_str(image) + " " +
                                std::string(py::str(image.dtype())));
  const int64_t h = image.shape(0), w = image.shape(1), bpp = image.ndim() == 3 ? image.shape(2) : 1;
  const bool pixels_packed =
      (image.ndim() == 2 || bpp == 1 || image.strides(2) == 1) && (w == 1 || image.strides(1) == bpp);
  const int64_t stride = h == 1 ? w * bpp : image.strides(0);
  if (!pixels_packed || stride < w * bpp)
    throw std::invalid_argument("image rows must be packed pixels with a row stride of at least " +
                                std::to_string(w * bpp) + " bytes");
  if (!py::isinstance<py::array_t<float>>(out) || !(out.flags() & py::array::c_style) || !out.writeable() ||
      (out.ndim() != 3 && !(out.ndim() == 4 && out.shape(0) == 1)))
    throw std::invalid_argument("out must be a writeable C-contiguous float32 array HxWxC or 1xHxWxC, got " +
                                shape_str(out) + " " + std::string(py::str(out.dtype())));
  const int d = static_cast<int>(out.ndim()) - 3;
  preprocess::WarpRequest r{};
  auto side = [](int64_t v) { return static_cast<int>(std::min<int64_t>(v, INT32_MAX)); };  // the plan bounds them
  r.src_w = side(w);
  r.src_h = side(h);
  r.bpp = side(bpp);
  r.stride = stride;
  r.out_h = side(out.shape(d));
  r.out_w = side(out.shape(d + 1));
  r.out_c = side(out.shape(d + 2));
  r.matrix = matrix;
  r.index = index;
  r.scale = scale;
  r.bias = bias;
  const preprocess::WarpPlan plan = preprocess::build_warp_plan(r);
  const auto* src = static_cast<const uint8_t*>(image.data());
  auto* dst = static_cast<float*>(const_cast<void*>(out.data()));
  py::gil_scoped_release release;
  preprocess::u8_warp_affine(plan, src, dst);
}

}  // namespace

void bind_warp(py::module_& m) {
  m.def("warp_affine", &warp_affine, py::arg("image"), py::arg("out"), py::arg("matrix"), py::arg("index"),
        py::arg("scale"), py::arg("bias"),
        "Bilinear affine crop of a uint8 image into a float32 HxWxC tensor: out[y, x, c] = "
        "sample(image[..., index[c]], matrix @ (x, y, 1)) * scale[c] + bias[c]; black outside the image.");
}

}  // namespace edgeinf::bindings
