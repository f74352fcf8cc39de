// MoRAM's routing on the CPU: the top-k selection, the sparse read-out and the router's backward,
// each one pass over a token's row (moram_avalanche/layers/moram/paths/cpu_kernel.py builds and calls it).
//
// The arithmetic is the reference path's (moram_avalanche/layers/moram/paths/reference.py), token by token:
//   select:        n = max(||p||, eps); the k largest entries of p (signed) and their atoms
//   read_out:      y = b + sum_j c_j B[idx_j], zero coefficients skipped (the eval gate's)
//   route_backward dL/dp from dL/dy, taking only the k dot products dL/dy . B_i each token needs
//                  (the PyTorch path takes dL/dy B^T over the whole bank, then k columns)
// Only float32 contiguous tensors; the Python side checks and falls back to PyTorch otherwise.

#include <torch/extension.h>
#include <ATen/Parallel.h>

#include <algorithm>
#include <cstring>
#include <cmath>
#include <limits>
#include <vector>

namespace {

constexpr float kEps = 1e-12f;  // RELEVANCE_EPS of paths/reference.py
constexpr int64_t kGrain = 16;  // tokens per parallel task

void check_matrix(const torch::Tensor& t, const char* name, c10::ScalarType type) {
  TORCH_CHECK(t.device().is_cpu(), name, " must be on the CPU");
  TORCH_CHECK(t.dim() == 2, name, " must be 2-d, got ", t.dim(), "-d");
  TORCH_CHECK(t.scalar_type() == type, name, " must be ", type, ", got ", t.scalar_type());
  TORCH_CHECK(t.is_contiguous(), name, " must be contiguous");
}

// Inserts t into the descending column top[0..m) of one group (branch-free: max/min chain).
inline void insert_descending(float* top, int64_t stride, int64_t m, float t) {
  for (int64_t l = 0; l < m; ++l) {
    const float kept = top[l * stride];
    top[l * stride] = std::max(kept, t);
    t = std::min(kept, t);
  }
}

// sum_d a[d] * b[d] in 8 lanes (GCC / Clang vector extensions: one SIMD register, whatever -O level)
inline float dot_product(const float* a, const float* b, int64_t n) {
  typedef float lanes_t __attribute__((vector_size(32)));
  lanes_t acc0 = {0.f, 0.f, 0.f, 0.f, 0.f, 0.f, 0.f, 0.f}, acc1 = acc0;
  int64_t d = 0;
  for (; d + 16 <= n; d += 16) {
    lanes_t x0, y0, x1, y1;
    std::memcpy(&x0, a + d, sizeof(x0));
    std::memcpy(&y0, b + d, sizeof(y0));
    std::memcpy(&x1, a + d + 8, sizeof(x1));
    std::memcpy(&y1, b + d + 8, sizeof(y1));
    acc0 += x0 * y0;
    acc1 += x1 * y1;
  }
  acc0 += acc1;
  float total = 0.f;
  for (int l = 0; l < 8; ++l) total += acc0[l];
  for (; d < n; ++d) total += a[d] * b[d];
  return total;
}

// o[d] = (bias[d] or 0) + sum_j c[j] * rows[j][d]: 8 columns at a time, every term added to them
// in register before the next 8 (each row read once, o written once); terms in order j = 0, 1, ...
inline void sum_rows(float* o, const float* bias, const float* const* rows, const float* c, int64_t terms,
                     int64_t n) {
  typedef float lanes_t __attribute__((vector_size(32)));
  int64_t d = 0;
  for (; d + 8 <= n; d += 8) {
    lanes_t acc = {0.f, 0.f, 0.f, 0.f, 0.f, 0.f, 0.f, 0.f};
    if (bias != nullptr) std::memcpy(&acc, bias + d, sizeof(acc));
    for (int64_t j = 0; j < terms; ++j) {
      lanes_t y;
      std::memcpy(&y, rows[j] + d, sizeof(y));
      acc += c[j] * y;
    }
    std::memcpy(o + d, &acc, sizeof(acc));
  }
  for (; d < n; ++d) {
    float total = bias != nullptr ? bias[d] : 0.f;
    for (int64_t j = 0; j < terms; ++j) total += c[j] * rows[j][d];
    o[d] = total;
  }
}

}  // namespace

// (kept values [N, k], kept atoms [N, k] int64, norm [N, 1]) of projections p [N, R]; the k
// largest entries of each row, in no particular order (torch.topk(sorted=False)'s set, ties
// broken towards the lower index); norm = max(||p||, eps).
// One token's row: norm, the k kept entries (values, atoms). G groups of M (G * M = k); kG / kM are
// the compile-time values of the common case (0: read g / m at run time).
template <int kG, int kM>
void select_row(const float* p, int64_t R, int64_t k, int64_t g_runtime, int64_t m_runtime, float* top,
                float* cand, int64_t* cand_index, float* vo, int64_t* io, float* norm_out) {
  const int64_t G = kG ? kG : g_runtime, M = kM ? kM : m_runtime;
  float lanes[8] = {0.f, 0.f, 0.f, 0.f, 0.f, 0.f, 0.f, 0.f};
  int64_t r8 = 0;
  for (; r8 + 8 <= R; r8 += 8) for (int l = 0; l < 8; ++l) lanes[l] += p[r8 + l] * p[r8 + l];
  for (; r8 < R; ++r8) lanes[0] += p[r8] * p[r8];
  const float squares = ((lanes[0] + lanes[1]) + (lanes[2] + lanes[3])) + ((lanes[4] + lanes[5]) + (lanes[6] + lanes[7]));
  *norm_out = std::max(std::sqrt(squares), kEps);

  for (int64_t l = 0; l < G * M; ++l) top[l] = -std::numeric_limits<float>::infinity();
  int64_t r = 0;
  for (; r + G <= R; r += G) {
    for (int64_t g = 0; g < G; ++g) insert_descending(top + g, G, M, p[r + g]);
  }
  for (; r < R; ++r) insert_descending(top + r % G, G, M, p[r]);
  float bound = top[(M - 1) * G];
  for (int64_t g = 1; g < G; ++g) bound = std::min(bound, top[(M - 1) * G + g]);

  int count = 0;  // branch-free compaction of the candidates
  for (int64_t i = 0; i < R; ++i) {
    cand[count] = p[i];
    cand_index[count] = i;
    count += p[i] >= bound ? 1 : 0;
  }
  // keep the candidates of rank < k (rank: entries above, and equal ones at a lower index)
  int64_t kept = 0;
  for (int a = 0; a < count && kept < k; ++a) {
    const float v = cand[a];
    int rank = 0;
    for (int b = 0; b < a; ++b) rank += cand[b] >= v ? 1 : 0;
    for (int b = a + 1; b < count; ++b) rank += cand[b] > v ? 1 : 0;
    if (rank < k) {
      vo[kept] = v;
      io[kept] = cand_index[a];
      ++kept;
    }
  }
  // only a NaN in the row leaves fewer (its norm is NaN too): the output carries the NaN
  for (int64_t j = kept; j < k; ++j) {
    vo[j] = std::numeric_limits<float>::quiet_NaN();
    io[j] = j;
  }
}

// (kept values [N, k], kept atoms [N, k] int64, norm [N, 1]) of projections p [N, R]; the k
// largest entries of each row, in no particular order (torch.topk(sorted=False)'s set, ties
// broken towards the lower index); norm = max(||p||, eps).
std::vector<torch::Tensor> select_atoms(const torch::Tensor& proj, int64_t k) {
  check_matrix(proj, "proj", torch::kFloat);
  const int64_t N = proj.size(0), R = proj.size(1);
  TORCH_CHECK(k >= 1 && k <= R, "k must be in [1, ", R, "], got ", k);
  auto values = torch::empty({N, k}, proj.options());
  auto index = torch::empty({N, k}, proj.options().dtype(torch::kLong));
  auto norm = torch::empty({N, 1}, proj.options());
  const float* P = proj.data_ptr<float>();
  float* VO = values.data_ptr<float>();
  int64_t* IO = index.data_ptr<int64_t>();
  float* NO = norm.data_ptr<float>();
  // A lower bound of the k-th largest: split the row into G groups (r mod G), keep the M = k / G
  // largest of each; every group has M entries at or above its M-th largest, so the smallest of
  // those G values has k entries at or above it. Only entries at or above it are candidates.
  int64_t G = 1;
  for (int64_t g : {4, 3, 2}) {
    if (k % g == 0) { G = g; break; }
  }
  const int64_t M = k / G;
  at::parallel_for(0, N, kGrain, [&](int64_t begin, int64_t end) {
    std::vector<float> top(G * M), cand(R);
    std::vector<int64_t> cand_index(R);
    for (int64_t n = begin; n < end; ++n) {
      if (G == 4 && M == 4) {
        select_row<4, 4>(P + n * R, R, k, G, M, top.data(), cand.data(), cand_index.data(), VO + n * k, IO + n * k, NO + n);
      } else {
        select_row<0, 0>(P + n * R, R, k, G, M, top.data(), cand.data(), cand_index.data(), VO + n * k, IO + n * k, NO + n);
      }
    }
  });
  return {values, index, norm};
}

// y [N, D] = bias + sum_j coef[n, j] * values[index[n, j]]; zero coefficients are skipped
// (a + 0 == a). Each row is summed in the order of its k entries.
torch::Tensor read_out(const torch::Tensor& index, const torch::Tensor& coef, const torch::Tensor& values,
                       const c10::optional<torch::Tensor>& bias) {
  check_matrix(index, "index", torch::kLong);
  check_matrix(coef, "coef", torch::kFloat);
  check_matrix(values, "values", torch::kFloat);
  TORCH_CHECK(index.sizes() == coef.sizes(), "index and coef must have one shape");
  const int64_t N = index.size(0), k = index.size(1), R = values.size(0), D = values.size(1);
  const float* B = nullptr;
  if (bias.has_value()) {
    TORCH_CHECK(bias->device().is_cpu() && bias->scalar_type() == torch::kFloat && bias->is_contiguous() &&
                    bias->dim() == 1 && bias->size(0) == D,
                "bias must be a contiguous float32 [", D, "] CPU tensor");
    B = bias->data_ptr<float>();
  }
  auto out = torch::empty({N, D}, values.options());
  const int64_t* I = index.data_ptr<int64_t>();
  const float* C = coef.data_ptr<float>();
  const float* V = values.data_ptr<float>();
  float* O = out.data_ptr<float>();
  at::parallel_for(0, N, kGrain, [&](int64_t begin, int64_t end) {
    std::vector<const float*> rows(k);
    std::vector<float> coefs(k);
    for (int64_t n = begin; n < end; ++n) {
      int64_t used = 0;  // the non-zero terms, in order
      for (int64_t j = 0; j < k; ++j) {
        const float c = C[n * k + j];
        if (c == 0.f) continue;
        const int64_t atom = I[n * k + j];
        TORCH_CHECK(atom >= 0 && atom < R, "atom index ", atom, " outside the bank of ", R);
        rows[used] = V + atom * D;
        coefs[used] = c;
        ++used;
      }
      sum_rows(O + n * D, B, rows.data(), coefs.data(), used, D);
    }
  });
  return out;
}

// dL/dp [N, R] from dL/dy [N, D], the value bank [R, D] and the saved routing state -- what
// reference.router_backward does with tensor ops after the GEMM dL/dy B^T over the whole bank;
// here only the k dot products each token needs (dc_j = dL/dy . B[idx_j]) are taken:
//   dp_I = dc * w; du = dc * p_I * gate; dz = u * (du - <du, u>); ds_I = dz / tau;
//   dp_I += ds_I / n; dp = p * (-<ds_I, s_I> / n^2) [0 where n was clamped]; dp[idx] += dp_I
torch::Tensor route_backward(const torch::Tensor& grad_out, const torch::Tensor& values, const torch::Tensor& proj,
                             const torch::Tensor& index, const torch::Tensor& weights, const torch::Tensor& softmax,
                             const torch::Tensor& kept_relevance, const torch::Tensor& kept_proj,
                             const torch::Tensor& norm, double temperature, double threshold, bool gated) {
  check_matrix(grad_out, "grad_out", torch::kFloat);
  check_matrix(values, "values", torch::kFloat);
  check_matrix(proj, "proj", torch::kFloat);
  check_matrix(index, "index", torch::kLong);
  for (const auto* t : {&weights, &softmax, &kept_relevance, &kept_proj}) {
    check_matrix(*t, "routing state", torch::kFloat);
    TORCH_CHECK(t->sizes() == index.sizes(), "routing state must be [N, k] like index");
  }
  check_matrix(norm, "norm", torch::kFloat);
  const int64_t N = proj.size(0), R = proj.size(1), k = index.size(1), D = values.size(1);
  TORCH_CHECK(values.size(0) == R, "values has ", values.size(0), " rows, proj ", R, " columns");
  TORCH_CHECK(grad_out.size(0) == N && grad_out.size(1) == D, "grad_out must be [", N, ", ", D, "]");
  TORCH_CHECK(index.size(0) == N && norm.size(0) == N, "routing state must have one row per token");
  auto grad_proj = torch::empty({N, R}, proj.options());
  const float* GO = grad_out.data_ptr<float>();
  const float* V = values.data_ptr<float>();
  float* Gp = grad_proj.data_ptr<float>();
  const float* P = proj.data_ptr<float>();
  const int64_t* I = index.data_ptr<int64_t>();
  const float* W = weights.data_ptr<float>();
  const float* U = softmax.data_ptr<float>();
  const float* S = kept_relevance.data_ptr<float>();
  const float* KP = kept_proj.data_ptr<float>();
  const float* NO = norm.data_ptr<float>();
  const float tau = static_cast<float>(temperature), thr = static_cast<float>(threshold);
  at::parallel_for(0, N, kGrain, [&](int64_t begin, int64_t end) {
    std::vector<float> grad_kept(k), grad_soft(k);
    for (int64_t n = begin; n < end; ++n) {
      const float* __restrict__ go = GO + n * D;
      float* g = Gp + n * R;
      const float* p = P + n * R;
      const int64_t* idx = I + n * k;
      const float *w = W + n * k, *u = U + n * k, *s = S + n * k, *kp = KP + n * k;
      const float nrm = NO[n];
      float dot = 0.f;
      for (int64_t j = 0; j < k; ++j) {
        const int64_t atom = idx[j];
        TORCH_CHECK(atom >= 0 && atom < R, "atom index ", atom, " outside the bank of ", R);
        const float* __restrict__ row = V + atom * D;
        const float dc = dot_product(go, row, D);
        grad_kept[j] = dc * w[j];
        float ds = dc * kp[j];
        if (gated && !(s[j] >= thr)) ds = 0.f;
        grad_soft[j] = ds;
        dot += ds * u[j];
      }
      float norm_dot = 0.f;
      for (int64_t j = 0; j < k; ++j) {
        const float dz = u[j] * (grad_soft[j] - dot);
        const float ds_rel = dz / tau;
        grad_kept[j] += ds_rel / nrm;
        norm_dot += ds_rel * s[j];
      }
      const float scale = nrm > kEps ? -norm_dot / (nrm * nrm) : 0.f;
      for (int64_t r = 0; r < R; ++r) g[r] = p[r] * scale;
      for (int64_t j = 0; j < k; ++j) g[idx[j]] += grad_kept[j];
    }
  });
  return grad_proj;
}

PYBIND11_MODULE(TORCH_EXTENSION_NAME, m) {
  m.doc() = "MoRAM routing kernels (CPU, float32)";
  m.def("select", &select_atoms, "k largest entries per row and the row norms");
  m.def("read_out", &read_out, "sparse read-out of value rows");
  m.def("route_backward", &route_backward, "router backward from dL/dy");
}
