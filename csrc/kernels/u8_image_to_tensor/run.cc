// Running a plan over one frame: output rows in order, each source row resampled once.
#include <algorithm>
#include <cstring>
#include <vector>

#include "../../threadpool.h"
#include "image_to_tensor.h"

namespace edgeinf::preprocess {
namespace {

int element_size(OutType t) { return t == OutType::kFloat32 ? 4 : 1; }

// Row buffers of one pass: two horizontally resampled source rows (tagged by source row)
// and the vertically blended row.
constexpr int kPrefetchRows = 4;

struct PassRows {
  std::vector<int16_t> h[2], v;
  int tag[2] = {-1, -1};
  bool primed = false;  // the source rows of the first output rows ahead were requested
  int plane_stride = 0;
};

struct Workspace {
  std::vector<PassRows> pass;
  std::vector<int16_t> colour;     // YUV: the converted row (1/128 levels), input of the affine stage
  std::vector<int32_t> acc[3][2];  // area: per plane, the current and the next output row's sums
};

// The source rows of one area sum, handed to the kernels kAreaRowBatch at a time.
struct RowBatch {
  const Kernels& k;
  const int n;
  int32_t* const acc;
  bool init;  // the next call starts the sum
  const uint8_t* rows[kAreaRowBatch];
  int32_t weights[kAreaRowBatch];
  int count = 0;

  void add(const uint8_t* row, int32_t w) {
    rows[count] = row;
    weights[count] = w;
    if (++count == kAreaRowBatch) flush();
  }

  void flush() {
    if (count == 0) return;
    if (k.accumulate_rows) {
      k.accumulate_rows(rows, weights, count, n, acc, init);
    } else {
      for (int i = 0; i < count; ++i) k.accumulate(rows[i], n, weights[i], acc, init && i == 0);
    }
    init = false;
    count = 0;
  }
};

class RowRunner {
 public:
  // `ws` may hold an earlier run's buffers: they are resized and cleared here.
  RowRunner(const Plan& plan, const Frame& frame, uint8_t* out, const Kernels& k, Workspace& ws)
      : p_(plan), f_(frame), out_(out), k_(k), esize_(element_size(plan.out_type)), ws_(ws) {
    const int n = plan.dst_w;
    ws_.pass.resize(plan.passes.size());
    for (size_t i = 0; i < plan.passes.size(); ++i) {
      const HPass& pass = plan.passes[i];
      PassRows& r = ws_.pass[i];
      r.tag[0] = r.tag[1] = -1;
      r.primed = false;
      r.plane_stride = n + kRowSlack;
      const size_t size =
          pass.planar ? static_cast<size_t>(pass.nch) * r.plane_stride : static_cast<size_t>(pass.nch) * n + kRowSlack;
      // Zero-initialized: SIMD stores may run into the slack, nothing reads it.
      r.h[0].assign(size, 0);
      r.h[1].assign(size, 0);
      r.v.assign(size, 0);
    }
    if (plan.yuv) ws_.colour.assign(static_cast<size_t>(plan.out_c) * n + kRowSlack, 0);
    if (plan.resize == Resize::kArea) {
      for (int k = 0; k < plan.planes; ++k)
        for (auto& a : ws_.acc[k]) a.assign(static_cast<size_t>(plan.span_bytes[k]) + kAccSlack, 0);
    }
  }

  void run_rows(int y_begin, int y_end) {
    const int dy0 = p_.dst_y, dy1 = p_.dst_y + p_.dst_h;
    const int content_begin = std::max(y_begin, dy0), content_end = std::min(y_end, dy1);
    for (int y = y_begin; y < y_end; ++y) {
      if (y < dy0 || y >= dy1) pad_row(y);
    }
    if (content_begin >= content_end) return;
    if (p_.resize == Resize::kArea) {
      area_rows(content_begin - dy0, content_end - dy0);
    } else {
      for (int y = content_begin; y < content_end; ++y) {
        for (size_t i = 0; i < p_.passes.size(); ++i) linear_row(i, y - dy0);
        emit_row(y);
      }
    }
  }

 private:
  // The first byte of a plane's row that the plan reads (column offsets count from it).
  const uint8_t* plane_row(int plane, int row) const {
    return f_.plane[plane] + int64_t{row} * f_.stride[plane] + p_.col_base[plane];
  }

  // Horizontal pass of source row `row` into one of the two slots, unless it is cached.
  const int16_t* hrow(size_t pi, int row, int keep) {
    PassRows& r = ws_.pass[pi];
    for (int s = 0; s < 2; ++s)
      if (r.tag[s] == row) return r.h[s].data();
    const int slot = (r.tag[0] == keep) ? 1 : 0;  // never evict the other row this output needs
    const HPass& pass = p_.passes[pi];
    LinePrefetch none;
    k_.hresample(pass, plane_row(pass.plane, row), p_.dst_w, r.h[slot].data(), r.plane_stride, none);
    r.tag[slot] = row;
    return r.h[slot].data();
  }

  // Source rows come from L3 or DRAM, and the hardware prefetchers do not follow the jumps
  // between rows: the rows of output row cy, to request ahead of their use.
  LinePrefetch source_lines(const HPass& pass, const VTable& t, int cy) const {
    LinePrefetch lines;
    if (pass.offset.empty() || cy >= static_cast<int>(t.row0.size())) return lines;
    lines.row0 = plane_row(pass.plane, t.row0[cy]);
    lines.row1 = t.b1[cy] ? plane_row(pass.plane, t.row0[cy] + 1) : lines.row0;
    lines.next = pass.offset.front();
    lines.end = pass.offset.back() + kWindow;
    return lines;
  }

  void linear_row(size_t pi, int cy) {
    const HPass& pass = p_.passes[pi];
    const VTable& t = pass.chroma_rows ? p_.chroma : p_.luma;
    const int row0 = t.row0[cy], b1 = t.b1[cy];
    PassRows& r = ws_.pass[pi];
    if (t.disjoint) {  // each source row serves this output row only: resample straight into v
      // a camera frame arrives cold: the rows of the output row kPrefetchRows ahead are
      // requested during this row (at the first row, the rows in between at once)
      if (!r.primed) {
        for (int k = 0; k < kPrefetchRows; ++k) source_lines(pass, t, cy + k).flush();
        r.primed = true;
      }
      LinePrefetch ahead = source_lines(pass, t, cy + kPrefetchRows);
      const uint8_t* src0 = plane_row(pass.plane, row0);
      if (b1 == 0)
        k_.hresample(pass, src0, p_.dst_w, r.v.data(), r.plane_stride, ahead);
      else
        k_.hblend(pass, src0, plane_row(pass.plane, row0 + 1), b1, p_.dst_w, r.v.data(), r.plane_stride, ahead);
      ahead.flush();  // the lines the kernel's loop did not request
      return;
    }
    const int n = pass.planar ? pass.nch * r.plane_stride : pass.nch * p_.dst_w;
    const int16_t* h0 = hrow(pi, row0, b1 ? row0 + 1 : -1);
    if (b1 == 0) {
      std::memcpy(r.v.data(), h0, sizeof(int16_t) * n);
      return;
    }
    const int16_t* h1 = hrow(pi, row0 + 1, row0);
    k_.vblend(h0, h1, b1, n, r.v.data());
  }

  // Area: per plane, the weighted sum of its source rows for one output row. A source row
  // that straddles two output rows is added to both sums while it is in cache.
  void area_rows(int cy_begin, int cy_end) {
    bool carried[3] = {false, false, false};
    for (int cy = cy_begin; cy < cy_end; ++cy) {
      bool carry_next[3] = {false, false, false};
      for (int k = 0; k < p_.planes; ++k) {
        const int n = p_.span_bytes[k];
        if (n <= 0) continue;
        const VTable& t = (k > 0) ? p_.chroma : p_.luma;
        std::vector<int32_t>* acc = ws_.acc[k];
        const int32_t first = t.tap_start[cy], last = t.tap_start[cy + 1] - 1;
        RowBatch batch{k_, n, acc[0].data(), !carried[k]};
        for (int32_t kk = carried[k] ? first + 1 : first; kk <= last; ++kk)
          batch.add(plane_row(k, t.tap_row[kk]), t.tap_weight[kk]);
        batch.flush();
        const int row = t.tap_row[last];
        if (cy + 1 < cy_end && t.tap_row[t.tap_start[cy + 1]] == row) {  // the last row straddles: the next sum's first
          k_.accumulate(plane_row(k, row), n, t.tap_weight[t.tap_start[cy + 1]], acc[1].data(), true);
          carry_next[k] = true;
        }
      }
      for (size_t i = 0; i < p_.passes.size(); ++i) {
        const HPass& pass = p_.passes[i];
        PassRows& r = ws_.pass[i];
        k_.area_reduce(pass, ws_.acc[pass.plane][0].data(), p_.dst_w, r.v.data(), r.plane_stride);
      }
      emit_row(cy + p_.dst_y);
      for (int k = 0; k < p_.planes; ++k) {
        std::swap(ws_.acc[k][0], ws_.acc[k][1]);
        carried[k] = carry_next[k];
      }
    }
  }

  void emit_row(int y) {
    const int out_c = p_.out_c;
    const size_t row_elems = static_cast<size_t>(p_.out_w) * (p_.nchw ? 1 : out_c);
    const int n = p_.dst_w;
    if (!p_.nchw) {
      uint8_t* row = out_ + static_cast<size_t>(y) * row_elems * esize_;
      fill(row, 0, p_.dst_x * out_c, out_c, 0);
      uint8_t* content = row + static_cast<size_t>(p_.dst_x) * out_c * esize_;
      if (p_.yuv) {
        const int16_t *a0, *a1, *a2;
        inputs(0, a0, a1, a2);
        yuv_row(a0, a1, a2, p_.yuv_row, p_.stage[0], content);
      } else if (!p_.matrix) {
        k_.affine(ws_.pass[0].v.data(), n * out_c, p_.stage[0], content);
      } else {
        const int16_t *a0, *a1, *a2;
        inputs(0, a0, a1, a2);
        k_.matrix(a0, a1, a2, n * out_c, p_.stage[0], content);
      }
      fill(row, (p_.dst_x + n) * out_c, p_.out_w * out_c, out_c, 0);
      return;
    }
    for (int c = 0; c < out_c; ++c) {
      uint8_t* row = out_ + (static_cast<size_t>(c) * p_.out_h + y) * row_elems * esize_;
      fill(row, 0, p_.dst_x, 1, c);
      uint8_t* content = row + static_cast<size_t>(p_.dst_x) * esize_;
      const int16_t *a0, *a1, *a2;
      inputs(c, a0, a1, a2);
      if (p_.yuv)
        yuv_row(a0, a1, a2, p_.yuv_plane[c], p_.stage[c], content);
      else if (!p_.matrix)
        k_.affine(a0, n, p_.stage[c], content);
      else
        k_.matrix(a0, a1, a2, n, p_.stage[c], content);
      fill(row, p_.dst_x + n, p_.out_w, 1, c);
    }
  }

  // YUV -> RGB and the affine stage of one row (or channel plane): fused when the stage
  // has an integer map, else through the colour row.
  void yuv_row(const int16_t* y, const int16_t* u, const int16_t* v, const Yuv& k, const Stage& st, uint8_t* out) {
    if (st.int_map) return k_.yuv_quantize(y, u, v, p_.dst_w, k, st, out);
    k_.yuv_rgb(y, u, v, p_.dst_w, k, ws_.colour.data());
    k_.affine(ws_.colour.data(), p_.dst_w * k.nch, st, out);
  }

  // The colour stage's input rows for output channel c (NCHW) or for the row (NHWC, c = 0).
  void inputs(int c, const int16_t*& a0, const int16_t*& a1, const int16_t*& a2) const {
    if (p_.matrix || p_.yuv) {
      const int16_t* a[3];
      for (int k = 0; k < 3; ++k) {
        const PassRows& r = ws_.pass[p_.inputs[k][0]];
        a[k] = r.v.data() + p_.inputs[k][1] * r.plane_stride;
      }
      a0 = a[0];
      a1 = a[1];
      a2 = a[2];
      return;
    }
    // affine: channel c's plane, or the one shared row (gray)
    const PassRows& r0 = ws_.pass[0];
    const HPass& pass = p_.passes[0];
    a0 = (pass.planar && pass.nch > 1) ? r0.v.data() + c * r0.plane_stride : r0.v.data();
    a1 = a2 = a0;
  }

  // Pad elements [begin, end) of a row whose channel of element i is (i % period) + first.
  void fill(uint8_t* row, int begin, int end, int period, int first) const {
    for (int i = begin; i < end; ++i) {
      const float v = p_.pad_value[(period == 1 ? first : i % period)];
      switch (p_.out_type) {
        case OutType::kFloat32:
          reinterpret_cast<float*>(row)[i] = v;
          break;
        case OutType::kInt8:
          reinterpret_cast<int8_t*>(row)[i] = static_cast<int8_t>(v);
          break;
        case OutType::kUInt8:
          row[i] = static_cast<uint8_t>(v);
          break;
      }
    }
  }

  void pad_row(int y) {
    const size_t row_elems = static_cast<size_t>(p_.out_w) * (p_.nchw ? 1 : p_.out_c);
    if (!p_.nchw) {
      fill(out_ + static_cast<size_t>(y) * row_elems * esize_, 0, p_.out_w * p_.out_c, p_.out_c, 0);
      return;
    }
    for (int c = 0; c < p_.out_c; ++c)
      fill(out_ + (static_cast<size_t>(c) * p_.out_h + y) * row_elems * esize_, 0, p_.out_w, 1, c);
  }

  const Plan& p_;
  const Frame& f_;
  uint8_t* out_;
  const Kernels& k_;
  const int esize_;
  Workspace& ws_;
};

}  // namespace

void run_plan(const Plan& plan, const Frame& frame, void* out) {
  const Kernels& k = active_kernels();
  uint8_t* dst = static_cast<uint8_t*>(out);
  const int chunks = std::min(plan.threads, std::max(1, plan.out_h / 8));
  // Each thread keeps its row buffers from frame to frame: allocating them anew cost a cold
  // call (a frame after other work) a few microseconds in malloc's lists.
  auto run_chunk = [&](size_t t) {
    static thread_local Workspace ws;
    const int y0 = static_cast<int>(static_cast<int64_t>(plan.out_h) * static_cast<int64_t>(t) / chunks);
    const int y1 = static_cast<int>(static_cast<int64_t>(plan.out_h) * static_cast<int64_t>(t + 1) / chunks);
    RowRunner(plan, frame, dst, k, ws).run_rows(y0, y1);
  };
  parallel_for(static_cast<size_t>(chunks), static_cast<size_t>(chunks), run_chunk);
}

}  // namespace edgeinf::preprocess
