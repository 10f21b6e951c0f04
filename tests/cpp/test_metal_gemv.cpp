// The Metal GEMV and row-gather kernels (metal/kernels/gemv.h) on the emulator, for every block
// format, against the CPU:
//   - get_rows decodes bitwise like quant::dequantize_row (random valid blocks: every bit pattern);
//   - GEMV vs the exact product of the dequantized weights (double): |y − ref| <= depth·2^-24·Σ|w·x|,
//     depth = unit + ceil(units / L) + log2(L) + 1 (the longest chain of float additions);
//   - GEMV vs the CPU backend's gemv: within the CPU's documented activation-form bound
//     (docs/quantization.md: Σ|w_j|·e_j + 2e-5·Σ|w·x|) plus the bound above;
//   - results depend on the tile's L only: every tile with the same L gives the same bits, and the
//     4-row fc_hidden GEMV (K = 4) is bitwise four single-row GEMVs;
//   - the twenty-one formats with a Metal GEMV report it (IQ2_XXS, IQ3_S, IQ2_S, IQ1_S and IQ1_M
//     included); another type's error names it;
//   - the IQ codebooks (IQ2_XXS, IQ2_XS, IQ2_S, IQ3_XXS, IQ3_S, IQ1_S / IQ1_M) and sign table of the
//     Metal header are the CPU's;
//   - STRATA_METAL_MTP_TILE parsing.
#define STRATA_TEST_MAIN
#include "check.h"

#include <cmath>
#include <cstdio>
#include <cstring>
#include <random>
#include <vector>

#include "metal/emu/emu_device.h"
#include "metal/host/dispatch.h"
#include "metal/host/tiles.h"
#include "strata/cpu/gemv.h"
#include "strata/quant/dequantize.h"
#include "strata/quant/iq_grids.h"
#include "strata/util/error.h"
#include "test_quant_util.h"

// The kernel bodies' tables (kIq2xxsGrid, kIq2xsGrid, kIq2sGrid, kIq3xxsGrid, kIq3sGrid, kIqSigns,
// kIq1sGrid), as the emulator compiles them.
#include "metal/kernels/msl_compat.h"
#include "metal/kernels/quant_formats.h"
#include "metal/kernels/msl_compat_end.h"

using strata::mtl::Buffer;
using strata::mtl::BufferRef;
using strata::mtl::EmuDevice;
using strata::mtl::GemvTile;
using strata::quant::GGMLType;

namespace {

std::unique_ptr<Buffer> upload(EmuDevice& dev, const void* p, size_t n) {
  auto b = dev.new_buffer(std::max<size_t>(n, 1));
  std::memcpy(b->contents(), p, n);
  return b;
}

struct Matrix {
  GGMLType type;
  uint32_t rows, cols, row_bytes;
  std::vector<uint8_t> bytes;
  std::vector<float> deq;  // rows x cols, exact
};

Matrix random_matrix(GGMLType type, uint32_t rows, uint32_t cols, std::mt19937& rng) {
  Matrix m{type, rows, cols, static_cast<uint32_t>(strata::quant::row_bytes(type, cols)), {}, {}};
  m.bytes = quant_test::random_rows(type, rows, cols, rng);
  m.deq.resize(size_t{rows} * cols);
  for (uint32_t r = 0; r < rows; ++r)
    strata::quant::dequantize_row(type, m.bytes.data() + size_t{r} * m.row_bytes, m.deq.data() + size_t{r} * cols,
                                  cols);
  return m;
}

uint32_t unit_of(GGMLType t) {
  switch (t) {
    case GGMLType::F32:
    case GGMLType::F16:
    case GGMLType::BF16: return 8;
    case GGMLType::Q6_K:
    case GGMLType::Q2_K:
    case GGMLType::Q3_K:
    case GGMLType::IQ2_XS:
    case GGMLType::IQ2_S:
    case GGMLType::IQ1_M: return 16;
    default: return 32;
  }
}

std::vector<float> run_gemv(EmuDevice& dev, const Matrix& m, const std::vector<float>& X, uint32_t nx,
                            uint32_t x_stride, const GemvTile& tile) {
  auto bw = upload(dev, m.bytes.data(), m.bytes.size());
  auto bx = upload(dev, X.data(), X.size() * 4);
  const uint32_t y_stride = m.rows + 3;
  auto by = dev.new_buffer(size_t{nx} * y_stride * 4);
  strata::mtl::GemvCall c;
  c.type = m.type;
  c.W = BufferRef{bw.get()};
  c.rows = m.rows;
  c.cols = m.cols;
  c.row_bytes = m.row_bytes;
  c.X = BufferRef{bx.get()};
  c.nx = nx;
  c.x_stride = x_stride;
  c.Y = BufferRef{by.get()};
  c.y_stride = y_stride;
  strata::mtl::encode_gemv(dev, c, tile);
  dev.submit();
  std::vector<float> y(size_t{nx} * m.rows);
  const float* p = static_cast<const float*>(by->contents());
  for (uint32_t a = 0; a < nx; ++a)
    for (uint32_t r = 0; r < m.rows; ++r) y[size_t{a} * m.rows + r] = p[size_t{a} * y_stride + r];
  return y;
}

// The CPU activation form's per-element error bound e_j (docs/quantization.md).
double act_error(GGMLType t, const float* x, uint32_t cols, uint32_t j) {
  switch (t) {
    case GGMLType::F32:
    case GGMLType::F16:
    case GGMLType::BF16: return 0.0;
    case GGMLType::Q8_0:
    case GGMLType::Q4_0:
    case GGMLType::Q5_0:
    case GGMLType::Q5_1:
    case GGMLType::IQ4_NL: {
      const uint32_t b0 = j / 32 * 32;
      double amax = 0.0;
      for (uint32_t i = b0; i < b0 + 32; ++i) amax = std::max(amax, std::fabs(static_cast<double>(x[i])));
      return amax / 254.0 + std::ldexp(1.0, -11) * (std::fabs(static_cast<double>(x[j])) + amax / 254.0);
    }
    default: {
      const uint32_t b0 = j / 256 * 256;
      double amax = 0.0;
      for (uint32_t i = b0; i < std::min(cols, b0 + 256); ++i)
        amax = std::max(amax, std::fabs(static_cast<double>(x[i])));
      return amax / 254.0;
    }
  }
}

const GemvTile kTiles[] = {{32, 1, 4, 4}, {32, 2, 2, 8}, {32, 4, 1, 2}, {16, 2, 4, 4}, {16, 1, 8, 1},
                           {16, 4, 2, 4}, {8, 1, 4, 8},  {8, 4, 1, 4},  {8, 2, 8, 2}};

}  // namespace

TEST(get_rows_decodes_like_dequantize_row) {
  EmuDevice dev;
  std::mt19937 rng(21);
  for (GGMLType t : quant_test::all_types()) {
    if (!strata::mtl::gemv_supported(t)) continue;  // formats the CPU alone runs
    const uint32_t cols = 512, rows = 9;
    Matrix m = random_matrix(t, rows, cols, rng);
    const std::vector<int32_t> ids = {3, 0, 8, 3, 5};
    auto bw = upload(dev, m.bytes.data(), m.bytes.size());
    auto bi = upload(dev, ids.data(), ids.size() * 4);
    const uint32_t out_stride = cols + 7;
    auto bo = dev.new_buffer(ids.size() * out_stride * 4);
    strata::mtl::encode_get_rows(dev, t, BufferRef{bw.get()}, cols, m.row_bytes, BufferRef{bi.get()},
                                 static_cast<uint32_t>(ids.size()), BufferRef{bo.get()}, out_stride);
    dev.submit();
    const float* o = static_cast<const float*>(bo->contents());
    bool same = true;
    for (size_t i = 0; i < ids.size(); ++i)
      same = same && std::memcmp(o + i * out_stride, m.deq.data() + size_t(ids[i]) * cols, cols * 4) == 0;
    CHECK_MSG(same, strata::quant::type_name(t));
  }
  CHECK_EQ(dev.emulator().violation_count(), uint64_t{0});
}

TEST(gemv_against_exact_and_cpu_every_format) {
  EmuDevice dev;
  std::mt19937 rng(22);
  std::normal_distribution<float> g(0.0f, 1.0f);
  int checked = 0;
  for (GGMLType t : quant_test::all_types()) {
    if (!strata::mtl::gemv_supported(t)) continue;  // formats the CPU alone runs
    for (uint32_t cols : {256u, 2560u}) {
      const uint32_t rows = 37, nx = 3, x_stride = cols + 5;
      Matrix m = random_matrix(t, rows, cols, rng);
      std::vector<float> X(size_t{nx} * x_stride);
      for (auto& v : X) v = g(rng);
      // CPU backend, one activation row at a time.
      std::vector<float> cpu(size_t{nx} * rows);
      for (uint32_t a = 0; a < nx; ++a)
        strata::cpu::gemv(t, m.bytes.data(), rows, cols, X.data() + size_t{a} * x_stride, cpu.data() + size_t{a} * rows,
                          nullptr);
      for (const GemvTile& tile : {kTiles[0], kTiles[3], kTiles[6]}) {
        const std::vector<float> y = run_gemv(dev, m, X, nx, x_stride, tile);
        const uint32_t units = (cols + unit_of(t) - 1) / unit_of(t);
        const double depth = unit_of(t) + (units + tile.L - 1) / tile.L + std::log2(tile.L) + 1;
        double worst_exact = 0.0, worst_cpu = 0.0;
        for (uint32_t a = 0; a < nx; ++a)
          for (uint32_t r = 0; r < rows; ++r) {
            const float* x = X.data() + size_t{a} * x_stride;
            const float* w = m.deq.data() + size_t{r} * cols;
            double ref = 0.0, mag = 0.0, act = 0.0;
            for (uint32_t j = 0; j < cols; ++j) {
              ref += static_cast<double>(w[j]) * x[j];
              mag += std::fabs(static_cast<double>(w[j]) * x[j]);
              act += std::fabs(static_cast<double>(w[j])) * act_error(t, x, cols, j);
            }
            const double ya = y[size_t{a} * rows + r];
            const double metal_bound = depth * std::ldexp(1.0, -24) * mag + 1e-30;
            worst_exact = std::max(worst_exact, std::fabs(ya - ref) / metal_bound);
            const double cpu_bound = act + 2e-5 * mag + metal_bound;
            worst_cpu = std::max(worst_cpu, std::fabs(ya - cpu[size_t{a} * rows + r]) / cpu_bound);
            ++checked;
          }
        CHECK_MSG(worst_exact <= 1.0,
                  std::string(strata::quant::type_name(t)) + " vs exact: " + std::to_string(worst_exact));
        CHECK_MSG(worst_cpu <= 1.0, std::string(strata::quant::type_name(t)) + " vs CPU: " + std::to_string(worst_cpu));
      }
    }
  }
  std::printf("metal gemv: %d outputs checked against the exact product and the CPU backend\n", checked);
  CHECK_EQ(dev.emulator().violation_count(), uint64_t{0});
}

TEST(gemv_formats_and_the_error_for_others) {
  // Every format here has its decoder (the tests above skip types gemv_supported refuses, so a format
  // dropped from it would otherwise go untested), IQ2_XXS, IQ3_S, IQ2_S, IQ1_S and IQ1_M too.
  for (GGMLType t :
       {GGMLType::F32,   GGMLType::F16,    GGMLType::BF16,    GGMLType::Q8_0,   GGMLType::Q4_0,  GGMLType::Q5_0,
        GGMLType::Q5_1,  GGMLType::IQ4_NL, GGMLType::Q2_K,    GGMLType::Q3_K,   GGMLType::Q4_K,  GGMLType::Q5_K,
        GGMLType::Q6_K,  GGMLType::IQ4_XS, GGMLType::IQ2_XXS, GGMLType::IQ2_XS, GGMLType::IQ2_S, GGMLType::IQ3_XXS,
        GGMLType::IQ3_S, GGMLType::IQ1_S,  GGMLType::IQ1_M})
    CHECK_MSG(strata::mtl::gemv_supported(t), strata::quant::type_name(t));
  CHECK(std::string(strata::mtl::gemv_type_suffix(GGMLType::IQ2_XXS)) == "iq2_xxs");
  CHECK(std::string(strata::mtl::gemv_type_suffix(GGMLType::IQ3_S)) == "iq3_s");
  CHECK(std::string(strata::mtl::gemv_type_suffix(GGMLType::IQ2_S)) == "iq2_s");
  CHECK(std::string(strata::mtl::gemv_type_suffix(GGMLType::IQ1_S)) == "iq1_s");
  CHECK(std::string(strata::mtl::gemv_type_suffix(GGMLType::IQ1_M)) == "iq1_m");
  // A type without a kernel is refused with an error naming it.
  CHECK(!strata::mtl::gemv_supported(GGMLType::Q4_1));
  bool threw = false;
  try {
    strata::mtl::gemv_type_suffix(GGMLType::Q4_1);
  } catch (const strata::Error& e) {
    threw = true;
    CHECK(e.kind() == strata::ErrorKind::Value);
    CHECK(std::string(e.what()).find("no Metal GEMV kernel for type Q4_1") != std::string::npos);
  }
  CHECK(threw);
}

TEST(iq_tables_are_the_cpus) {
  CHECK(std::memcmp(kIq2xxsGrid, strata::quant::kIQ2XXSGrid, sizeof(kIq2xxsGrid)) == 0);
  CHECK(std::memcmp(kIq2xsGrid, strata::quant::kIQ2XSGrid, sizeof(kIq2xsGrid)) == 0);
  CHECK(std::memcmp(kIq2sGrid, strata::quant::kIQ2SGrid, sizeof(kIq2sGrid)) == 0);
  CHECK(std::memcmp(kIq3xxsGrid, strata::quant::kIQ3XXSGrid, sizeof(kIq3xxsGrid)) == 0);
  CHECK(std::memcmp(kIq3sGrid, strata::quant::kIQ3SGrid, sizeof(kIq3sGrid)) == 0);
  CHECK(std::memcmp(kIqSigns, strata::quant::kIQSigns, sizeof(kIqSigns)) == 0);
  CHECK(std::memcmp(kIq1sGrid, strata::quant::kIQ1SGrid, sizeof(kIq1sGrid)) == 0);
  static_assert(sizeof(kIq2xxsGrid) == 256 * 8 && sizeof(kIq2xsGrid) == 512 * 8 && sizeof(kIq2sGrid) == 1024 * 8 &&
                sizeof(kIq3xxsGrid) == 256 * 4 && sizeof(kIq3sGrid) == 512 * 4 && sizeof(kIqSigns) == 128 &&
                sizeof(kIq1sGrid) == 2048 * 8);
}

TEST(results_depend_on_the_lane_split_only) {
  EmuDevice dev;
  std::mt19937 rng(23);
  std::normal_distribution<float> g(0.0f, 1.0f);
  for (GGMLType t :
       {GGMLType::F32, GGMLType::F16, GGMLType::Q8_0, GGMLType::Q4_0, GGMLType::Q5_1, GGMLType::IQ4_NL, GGMLType::Q4_K,
        GGMLType::Q6_K, GGMLType::Q3_K, GGMLType::Q5_K, GGMLType::IQ2_XS, GGMLType::IQ3_XXS, GGMLType::IQ2_XXS,
        GGMLType::IQ3_S, GGMLType::IQ2_S, GGMLType::IQ1_S, GGMLType::IQ1_M}) {
    const uint32_t rows = 45, cols = 512, nx = 9;
    Matrix m = random_matrix(t, rows, cols, rng);
    std::vector<float> X(size_t{nx} * cols);
    for (auto& v : X) v = g(rng);
    std::vector<float> by_L[3];
    bool same = true;
    for (const GemvTile& tile : kTiles) {
      const std::vector<float> y = run_gemv(dev, m, X, nx, cols, tile);
      std::vector<float>& ref = by_L[tile.L == 32 ? 0 : tile.L == 16 ? 1 : 2];
      if (ref.empty())
        ref = y;
      else
        same = same && std::memcmp(ref.data(), y.data(), y.size() * 4) == 0;
    }
    CHECK_MSG(same, strata::quant::type_name(t));
  }
}

TEST(fc_hidden_four_streams_as_one_gemv_is_bitwise_four_gemvs) {
  // the n = 4 normed streams are the 4 rows of one GEMV through fc_hidden (d x d).
  EmuDevice dev;
  std::mt19937 rng(24);
  std::normal_distribution<float> g(0.0f, 1.0f);
  for (GGMLType t : {GGMLType::F16, GGMLType::Q8_0, GGMLType::Q4_0, GGMLType::Q5_0}) {
    const uint32_t d = 256;
    Matrix m = random_matrix(t, d, d, rng);
    std::vector<float> streams(4 * size_t{d});
    for (auto& v : streams) v = g(rng);
    strata::mtl::GemvTiles tiles;
    const GemvTile tile = tiles.pick(d);
    CHECK_EQ(tile.K, 4u);  // the default tiles take all four streams in one pass
    const std::vector<float> batched = run_gemv(dev, m, streams, 4, d, tile);
    for (uint32_t s = 0; s < 4; ++s) {
      std::vector<float> one(streams.begin() + s * d, streams.begin() + (s + 1) * d);
      const std::vector<float> y = run_gemv(dev, m, one, 1, d, tile);
      CHECK_MSG(std::memcmp(y.data(), batched.data() + size_t{s} * d, d * 4) == 0, strata::quant::type_name(t));
    }
  }
}

TEST(tile_parsing_and_validation) {
  CHECK(strata::mtl::parse_gemv_tile("16,2,4,4") == (GemvTile{16, 2, 4, 4}));
  CHECK(strata::mtl::parse_gemv_tile(" 32 , 1 ,8, 8 ") == (GemvTile{32, 1, 8, 8}));
  for (const char* bad : {"", "16,2,4", "16,2,4,4,1", "12,2,4,4", "16,3,4,4", "16,4,4,8", "16,2,16,4", "a,b,c,d",
                          "16;2;4;4", "16,2,4,", "99999999999,1,1,1"})
    CHECK_THROWS(strata::mtl::parse_gemv_tile(bad));
  try {
    strata::mtl::parse_gemv_tile("16,4,4,8");
  } catch (const strata::Error& e) {
    CHECK(e.kind() == strata::ErrorKind::Config);
    CHECK(std::string(e.what()).find("R*K <= 16") != std::string::npos);
  }
  for (const GemvTile& t : kTiles) CHECK(strata::mtl::tile_supported(t));
  // The drafter's wide tile from Config.metal_mtp_tile (STRATA_METAL_MTP_TILE); "" = the defaults.
  CHECK(strata::mtl::drafter_tiles("8,4,2,4").wide == (GemvTile{8, 4, 2, 4}));
  CHECK(strata::mtl::drafter_tiles("8,4,2,4").narrow == strata::mtl::GemvTiles{}.narrow);
  CHECK(strata::mtl::drafter_tiles("") == strata::mtl::GemvTiles{});
  CHECK_THROWS(strata::mtl::drafter_tiles("8,4,2,5"));
}

TEST(reverse_between_barriers_exposes_a_missing_barrier) {
  // get_rows writes the activations the GEMV reads: with a barrier between them the answer is right in
  // either execution order; without one, the reversing device runs the GEMV first and it shows.
  std::mt19937 rng(25);
  const uint32_t cols = 256, rows = 16;
  Matrix emb = random_matrix(GGMLType::F16, 4, cols, rng);
  Matrix w = random_matrix(GGMLType::Q8_0, rows, cols, rng);
  std::vector<float> expect(rows);
  for (uint32_t r = 0; r < rows; ++r) {
    double s = 0.0;
    for (uint32_t j = 0; j < cols; ++j) s += static_cast<double>(w.deq[r * cols + j]) * emb.deq[2 * cols + j];
    expect[r] = static_cast<float>(s);
  }
  for (int with_barrier = 0; with_barrier < 2; ++with_barrier) {
    EmuDevice dev({}, /*reverse_between_barriers=*/true);
    auto be = upload(dev, emb.bytes.data(), emb.bytes.size());
    auto bw = upload(dev, w.bytes.data(), w.bytes.size());
    const int32_t id = 2;
    auto bi = upload(dev, &id, 4);
    auto bx = dev.new_buffer(cols * 4);
    auto by = dev.new_buffer(rows * 4);
    strata::mtl::encode_get_rows(dev, GGMLType::F16, BufferRef{be.get()}, cols, emb.row_bytes, BufferRef{bi.get()}, 1,
                                 BufferRef{bx.get()}, cols);
    if (with_barrier) dev.encoder().barrier();
    strata::mtl::GemvCall c;
    c.type = GGMLType::Q8_0;
    c.W = BufferRef{bw.get()};
    c.rows = rows;
    c.cols = cols;
    c.row_bytes = w.row_bytes;
    c.X = BufferRef{bx.get()};
    c.Y = BufferRef{by.get()};
    strata::mtl::encode_gemv(dev, c, strata::mtl::GemvTiles{}.narrow);
    dev.submit();
    const float* y = static_cast<const float*>(by->contents());
    bool close = true;
    for (uint32_t r = 0; r < rows; ++r)
      close = close && std::fabs(y[r] - expect[r]) <= 1e-3f * (1.0f + std::fabs(expect[r]));
    CHECK(close == (with_barrier == 1));
  }
}
