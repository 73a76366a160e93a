// edgeinf._C.ImagePlan: a frame-to-tensor plan, validated once, run per frame with the
// GIL released. Python builds it from a model's input spec (edgeinf/preprocess.py).
#include <pybind11/numpy.h>
#include <pybind11/stl.h>

#include <climits>
#include <cstdint>
#include <stdexcept>
#include <string>

#include "../kernels/u8_image_to_tensor/image_to_tensor.h"
#include "bindings.h"
#include "fastcall.h"
#include "quant_arrays.h"

namespace py = pybind11;

namespace edgeinf::bindings {
namespace {

using preprocess::Format;
using preprocess::OutType;
using preprocess::Plan;
using preprocess::Resize;

Format parse_format(const std::string& s) {
  static const std::pair<const char*, Format> names[] = {
      {"rgb", Format::kRGB},   {"bgr", Format::kBGR},   {"rgba", Format::kRGBA},
      {"bgra", Format::kBGRA}, {"gray", Format::kGray}, {"nv12", Format::kNV12},
      {"nv21", Format::kNV21}, {"i420", Format::kI420}, {"yuyv", Format::kYUYV}};
  for (const auto& [name, f] : names)
    if (s == name) return f;
  throw std::invalid_argument("unknown colour format '" + s +
                              "': expected one of rgb, bgr, rgba, bgra, gray, nv12, nv21, i420, yuyv");
}

Resize parse_resize(const std::string& s) {
  if (s == "nearest") return Resize::kNearest;
  if (s == "bilinear") return Resize::kBilinear;
  if (s == "area") return Resize::kArea;
  throw std::invalid_argument("unknown resize '" + s + "': expected nearest, bilinear or area");
}

OutType parse_dtype(const std::string& s) {
  if (s == "float32") return OutType::kFloat32;
  if (s == "int8") return OutType::kInt8;
  if (s == "uint8") return OutType::kUInt8;
  throw std::invalid_argument("unsupported output dtype '" + s + "': expected float32, int8 or uint8");
}

const char* dtype_name(OutType t) {
  return t == OutType::kFloat32 ? "float32" : t == OutType::kInt8 ? "int8" : "uint8";
}

std::string dims_str(std::initializer_list<int64_t> dims) {
  std::string s = "(";
  bool first = true;
  for (int64_t d : dims) {
    s += (first ? "" : ", ") + std::to_string(d);
    first = false;
  }
  return s + ")";
}

// A plan's sizes are int: a larger value is refused here (build_plan bounds them further).
int plan_int(int64_t v, const char* what) {
  if (v < INT32_MIN || v > INT32_MAX)
    throw std::invalid_argument(std::string(what) + " " + std::to_string(v) + " is out of range");
  return static_cast<int>(v);
}

bool is_yuv420(Format f) { return f == Format::kNV12 || f == Format::kNV21 || f == Format::kI420; }

int packed_channels(Format f) {
  switch (f) {
    case Format::kRGB:
    case Format::kBGR:
      return 3;
    case Format::kRGBA:
    case Format::kBGRA:
      return 4;
    case Format::kYUYV:
      return 2;
    default:
      return 1;
  }
}

// Checks the frame against the plan and resolves its planes. Rows may be strided (a view
// of a larger frame); pixels inside a row must be contiguous.
preprocess::Frame resolve_frame(const Plan& p, const py::array& a) {
  if (a.dtype().kind() != 'u' || a.itemsize() != 1)
    throw std::invalid_argument("frame must be uint8, got " + std::string(py::str(a.dtype())));
  const int64_t w = p.src_w, h = p.src_h;
  preprocess::Frame f;
  if (is_yuv420(p.format)) {
    if (a.ndim() != 2 || a.shape(0) != h * 3 / 2 || a.shape(1) != w)
      throw std::invalid_argument("a " + std::to_string(w) + "x" + std::to_string(h) + " 4:2:0 frame must have shape " +
                                  dims_str({h * 3 / 2, w}) + ", got " + shape_str(a));
    if (!(a.flags() & py::array::c_style))
      throw std::invalid_argument("a 4:2:0 frame must be C-contiguous (its planes follow each other)");
    const uint8_t* base = static_cast<const uint8_t*>(a.data());
    f.plane[0] = base;
    f.stride[0] = w;
    if (p.format == Format::kI420) {
      f.plane[1] = base + w * h;
      f.plane[2] = base + w * h + (w / 2) * (h / 2);
      f.stride[1] = f.stride[2] = w / 2;
    } else {
      f.plane[1] = base + w * h;
      f.stride[1] = w;
    }
    return f;
  }
  const int64_t c = packed_channels(p.format);
  const bool ok_dims = (a.ndim() == 3 && a.shape(2) == c) || (c == 1 && a.ndim() == 2);
  if (!ok_dims || a.shape(0) != h || a.shape(1) != w) {
    const std::string expected = c == 1 ? dims_str({h, w}) : dims_str({h, w, c});
    throw std::invalid_argument("frame must have shape " + expected + " for this plan, got " + shape_str(a));
  }
  const bool pixel_contiguous = (a.ndim() == 2 || a.strides(2) == 1) && (w == 1 || a.strides(1) == c);
  if (!pixel_contiguous || a.strides(0) < w * c)
    throw std::invalid_argument(
        "frame rows must be contiguous pixels with a row stride >= " + std::to_string(w * c) + " bytes; got strides " +
        std::string(py::str(py::cast(std::vector<py::ssize_t>(a.strides(), a.strides() + a.ndim())))) +
        " (use np.ascontiguousarray)");
  f.plane[0] = static_cast<const uint8_t*>(a.data());
  f.stride[0] = h == 1 ? w * c : a.strides(0);
  return f;
}

bool dtype_matches(const py::array& a, OutType t) {
  const char kind = a.dtype().kind();
  const py::ssize_t size = a.itemsize();
  switch (t) {
    case OutType::kFloat32:
      return kind == 'f' && size == 4;
    case OutType::kInt8:
      return kind == 'i' && size == 1;
    case OutType::kUInt8:
      return kind == 'u' && size == 1;
  }
  return false;
}

void check_output(const Plan& p, const py::array& out) {
  if (!dtype_matches(out, p.out_type))
    throw std::invalid_argument(std::string("output must be ") + dtype_name(p.out_type) + ", got " +
                                std::string(py::str(out.dtype())));
  if (!(out.flags() & py::array::c_style)) throw std::invalid_argument("output must be C-contiguous");
  if (!out.writeable()) throw std::invalid_argument("output array is read-only");
  const int64_t H = p.out_h, W = p.out_w, C = p.out_c;
  const int64_t want[3] = {p.nchw ? C : H, p.nchw ? H : W, p.nchw ? W : C};
  // Accept a leading batch dimension of 1, and (H, W) for one channel NHWC.
  int64_t got[3] = {1, 1, 1};
  const py::ssize_t nd = out.ndim();
  bool ok = nd >= 2 && nd <= 4 && (nd < 4 || out.shape(0) == 1);
  if (ok && nd >= 3) {
    for (int i = 0; i < 3; ++i) got[i] = out.shape(nd - 3 + i);
  } else if (ok) {  // (H, W): one channel, NHWC
    ok = !p.nchw && C == 1;
    got[0] = out.shape(0);
    got[1] = out.shape(1);
  }
  if (!ok || got[0] != want[0] || got[1] != want[1] || got[2] != want[2])
    throw std::invalid_argument("output must have shape " + (p.nchw ? dims_str({1, C, H, W}) : dims_str({1, H, W, C})) +
                                ", got " + shape_str(out));
}

// Validates, then runs with the GIL released.
void run_checked(const Plan& p, const py::array& frame, const py::array& out) {
  const preprocess::Frame f = resolve_frame(p, frame);
  check_output(p, out);
  void* dst = const_cast<void*>(out.data());  // writeable: checked above
  py::gil_scoped_release release;
  preprocess::run_plan(p, f, dst);
}

constexpr const char* kPlanCapsule = "edgeinf.ImagePlan";

// _run_plan(capsule, frame, out): ImagePlan.run for the per-frame path, called through
// CPython's METH_FASTCALL convention instead of pybind11's dispatcher. A camera frame's call
// usually finds the caches cold, and there the dispatcher's code cost about 9 µs per call
// (a bare two-array function: 33 µs cold through pybind11, 24 µs through this convention).
// The capsule comes from ImagePlan._capsule() and keeps the plan alive.
PyObject* run_plan_fast(PyObject*, PyObject* const* args, Py_ssize_t nargs) {
  if (nargs != 3) {
    PyErr_Format(PyExc_TypeError, "_run_plan expects (plan capsule, frame, out), got %zd arguments", nargs);
    return nullptr;
  }
  const auto* plan = static_cast<const Plan*>(PyCapsule_GetPointer(args[0], kPlanCapsule));
  if (plan == nullptr) return nullptr;
  for (int i = 1; i < 3; ++i) {
    if (!py::isinstance<py::array>(args[i])) {
      PyErr_Format(input_error_type(), "%s must be a numpy array, got %s", i == 1 ? "frame" : "output",
                   Py_TYPE(args[i])->tp_name);
      return nullptr;
    }
  }
  return call_translating([&]() -> PyObject* {
    run_checked(*plan, py::reinterpret_borrow<py::array>(args[1]), py::reinterpret_borrow<py::array>(args[2]));
    Py_RETURN_NONE;
  });
}

PyMethodDef run_plan_def = {"_run_plan", reinterpret_cast<PyCFunction>(reinterpret_cast<void (*)()>(&run_plan_fast)),
                            METH_FASTCALL, "ImagePlan.run(frame, out) of ImagePlan._capsule() (the per-frame path)."};

}  // namespace

void bind_preprocess(py::module_& m) {
  py::class_<Plan>(m, "ImagePlan", "A validated frame-to-tensor plan (see edgeinf.preprocess).")
      .def(py::init([](const std::string& format, std::pair<int64_t, int64_t> src_size, std::array<int64_t, 4> roi,
                       std::array<int64_t, 3> out_size, const std::string& layout, const std::string& dtype,
                       const std::string& resize, bool letterbox, bool bgr_out, const std::string& yuv_range,
                       std::array<float, 3> scale, std::array<float, 3> bias, std::array<float, 3> pad, float qmin,
                       float qmax, int64_t threads) {
             preprocess::PlanRequest r{};
             r.format = parse_format(format);
             r.src_w = plan_int(src_size.first, "image width");
             r.src_h = plan_int(src_size.second, "image height");
             r.roi_x = plan_int(roi[0], "ROI x");
             r.roi_y = plan_int(roi[1], "ROI y");
             r.roi_w = plan_int(roi[2], "ROI width");
             r.roi_h = plan_int(roi[3], "ROI height");
             r.out_w = plan_int(out_size[0], "output width");
             r.out_h = plan_int(out_size[1], "output height");
             r.out_c = plan_int(out_size[2], "output channels");
             if (layout != "NHWC" && layout != "NCHW")
               throw std::invalid_argument("layout must be NHWC or NCHW, got '" + layout + "'");
             r.nchw = layout == "NCHW";
             r.out_type = parse_dtype(dtype);
             r.resize = parse_resize(resize);
             r.letterbox = letterbox;
             r.bgr_out = bgr_out;
             if (yuv_range != "limited" && yuv_range != "full")
               throw std::invalid_argument("yuv_range must be 'limited' or 'full', got '" + yuv_range + "'");
             r.yuv_range = yuv_range == "full" ? preprocess::YuvRange::kFull : preprocess::YuvRange::kLimited;
             r.scale = scale;
             r.bias = bias;
             r.pad = pad;
             r.qmin = qmin;
             r.qmax = qmax;
             r.threads = plan_int(threads, "threads");
             return preprocess::build_plan(r);
           }),
           py::arg("format"), py::arg("src_size"), py::arg("roi"), py::arg("out_size"), py::arg("layout"),
           py::arg("dtype"), py::arg("resize"), py::arg("letterbox"), py::arg("bgr_out"), py::arg("yuv_range"),
           py::arg("scale"), py::arg("bias"), py::arg("pad"), py::arg("qmin"), py::arg("qmax"), py::arg("threads"))
      .def(
          "run", [](const Plan& p, const py::array& frame, const py::array& out) { run_checked(p, frame, out); },
          py::arg("frame"), py::arg("out"), "Convert one frame into `out` (validated first).")
      .def(
          "_capsule",
          [](const py::object& self) { return owner_capsule(self, self.cast<const Plan&>(), kPlanCapsule); },
          "The plan's address for _run_plan; the capsule keeps the plan alive.")
      .def_property_readonly("content",
                             [](const Plan& p) {
                               return std::array<int, 4>{p.dst_x, p.dst_y, p.dst_w, p.dst_h};
                             })
      .def_property_readonly("roi", [](const Plan& p) {
        return std::array<int, 4>{p.roi_x, p.roi_y, p.roi_w, p.roi_h};
      });

  add_fastcall(m, run_plan_def);
}

}  // namespace edgeinf::bindings
