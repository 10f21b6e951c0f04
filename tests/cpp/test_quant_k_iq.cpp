// The Q3_K, Q5_K, IQ2_XXS, IQ2_XS, IQ2_S, IQ3_XXS, IQ3_S, IQ1_S and IQ1_M block layouts: hand-built
// blocks decode to values worked out here from ggml's format description (known codebook entries,
// element 0 first: IQ2_XXS entry 0 is eight 0x08, entry 1 is 0x2b then seven 0x08, entry 255 is 0x08
// 0x19 0x08 0x08 0x19 0x2b 0x2b 0x2b; IQ2_XS entry 0 is eight 0x08, entry 511 eight 0x2b; IQ2_S entry
// 0 is eight 0x08, 256 is five 0x19 then 0x08 0x19 0x08, 767 is 0x19 0x19 0x08 0x19 0x08 0x08 0x2b
// 0x19, 1023 eight 0x2b; IQ3_XXS entry 0 is four 0x04, entry 255 is 0x04 0x1c 0x34 0x3e; IQ3_S
// entry 1 is 3 1 1 1, entry 256 is 7 5 9 5, entry 511 is 1 1 15 15; IQ1 entry 0 is eight −1, entry
// 1 is +1 then seven −1, 256 is −1 0 1 0 1 −1 0 −1, 2047 eight +1), the sign masks the SIMD
// kernels use agree with the sign table, and a short row is a clear error.
// Bitwise parity with gguf.quants on random blocks and on every codebook entry is checked from
// Python (tests/python/test_quant_parity.py); the dots in test_quant_gemv.cpp.
#define STRATA_TEST_MAIN
#include "check.h"

#include <bit>

#include "strata/quant/iq_grids.h"
#include "strata/util/error.h"
#include "test_quant_util.h"

namespace {
using namespace quant_test;
using namespace strata::quant;

// Bit j of the 8-bit sign pattern a 7-bit sign field stands for (bit 7 = parity).
bool negated(unsigned field, int j) {
  const unsigned bits = field | ((std::popcount(field) & 1u) << 7);
  return (bits >> j) & 1u;
}
}  // namespace

TEST(new_types_are_supported_and_named) {
  for (GGMLType t : {GGMLType::Q3_K, GGMLType::Q5_K, GGMLType::IQ2_XXS, GGMLType::IQ2_XS, GGMLType::IQ2_S,
                     GGMLType::IQ3_XXS, GGMLType::IQ3_S, GGMLType::IQ1_S, GGMLType::IQ1_M}) {
    CHECK(type_supported(t));
    CHECK(type_from_name(type_name(t)) == t);
  }
  CHECK(type_from_name("iq2_xxs") == GGMLType::IQ2_XXS);
  CHECK(type_from_name("iq2_xs") == GGMLType::IQ2_XS);
  CHECK(type_from_name("iq3_xxs") == GGMLType::IQ3_XXS);
  CHECK(type_from_name("iq3_s") == GGMLType::IQ3_S);
  CHECK(type_from_name("iq2_s") == GGMLType::IQ2_S);
  CHECK(type_from_name("iq1_s") == GGMLType::IQ1_S);
  CHECK(type_from_name("iq1_m") == GGMLType::IQ1_M);
  CHECK_EQ(row_bytes(GGMLType::Q3_K, 512), std::size_t{220});
  CHECK_EQ(row_bytes(GGMLType::IQ2_XS, 256), std::size_t{74});
  CHECK_EQ(row_bytes(GGMLType::IQ2_XXS, 512), std::size_t{132});
  CHECK_EQ(row_bytes(GGMLType::IQ3_S, 512), std::size_t{220});
  CHECK_EQ(row_bytes(GGMLType::IQ2_S, 512), std::size_t{164});
  CHECK_EQ(row_bytes(GGMLType::IQ1_S, 512), std::size_t{100});
  CHECK_EQ(row_bytes(GGMLType::IQ1_M, 512), std::size_t{112});
}

TEST(q3_k_hand_built_block) {
  // Group j (16 values) has scale j − 8 (stored j + 24); every 2-bit field at shift 2s holds s;
  // the high bit is set for odd l only, so q = s − 4 for even l and s for odd l.
  BlockQ3_K b{};
  for (int j = 0; j < 16; ++j) {
    const int stored = j + 24;
    b.scales[j % 8] = static_cast<uint8_t>(b.scales[j % 8] | ((stored & 0xF) << (4 * (j / 8))));
    b.scales[8 + j % 4] = static_cast<uint8_t>(b.scales[8 + j % 4] | ((stored >> 4) << (2 * (j / 4))));
  }
  std::memset(b.qs, 0xE4, sizeof(b.qs));
  for (int l = 0; l < 32; ++l) b.hmask[l] = (l % 2) ? 0xFF : 0x00;
  b.d = strata::fp32_to_fp16(0.5f);
  const auto y = dequant(GGMLType::Q3_K, reinterpret_cast<const uint8_t*>(&b), 256);
  for (int e = 0; e < 256; ++e) {
    const int s = (e % 128) / 32, l = e % 32;
    const int q = s - (l % 2 ? 0 : 4);
    CHECK_EQ(y[static_cast<std::size_t>(e)], (0.5f * static_cast<float>(e / 16 - 8)) * static_cast<float>(q));
  }
}

TEST(q5_k_hand_built_block) {
  // Q4_K's scales (group g: scale g + 1, min g) and nibbles (3 low, 12 high); the fifth bit is
  // set on even l.
  BlockQ5_K b{};
  b.d = strata::fp32_to_fp16(1.0f);
  b.dmin = strata::fp32_to_fp16(0.5f);
  std::memset(b.qs, 0xC3, sizeof(b.qs));
  for (int l = 0; l < 32; ++l) b.qh[l] = (l % 2) ? 0x00 : 0xFF;
  for (int g = 0; g < 4; ++g) {
    b.scales[g] = static_cast<uint8_t>(g + 1);
    b.scales[g + 4] = static_cast<uint8_t>(g);
  }
  for (int g = 4; g < 8; ++g) b.scales[g + 4] = static_cast<uint8_t>((g + 1) | (g << 4));
  const auto y = dequant(GGMLType::Q5_K, reinterpret_cast<const uint8_t*>(&b), 256);
  for (int e = 0; e < 256; ++e) {
    const int g = e / 32, l = e % 32;
    const int q = ((g % 2 == 0) ? 3 : 12) + (l % 2 ? 0 : 16);
    CHECK_EQ(y[static_cast<std::size_t>(e)],
             static_cast<float>(g + 1) * static_cast<float>(q) - 0.5f * static_cast<float>(g));
  }
}

TEST(iq2_xxs_hand_built_block) {
  // Group g: runs use entries 0, 1, 255, 0 (bytes of the first uint32); the sign fields of group g
  // are 4g .. 4g+3 and the scale nibble is 15 - g (top 4 bits of the second uint32).
  BlockIQ2_XXS b{};
  b.d = strata::fp32_to_fp16(0.5f);
  for (int g = 0; g < 8; ++g) {
    const uint32_t a0 = 0x00FF0100u;
    uint32_t a1 = static_cast<uint32_t>(15 - g) << 28;
    for (int l = 0; l < 4; ++l) a1 |= static_cast<uint32_t>(4 * g + l) << (7 * l);
    std::memcpy(b.qs + 4 * g, &a0, 4);
    std::memcpy(b.qs + 4 * g + 2, &a1, 4);
  }
  const int entry1[8] = {43, 8, 8, 8, 8, 8, 8, 8};
  const int entry255[8] = {8, 25, 8, 8, 25, 43, 43, 43};
  const auto y = dequant(GGMLType::IQ2_XXS, reinterpret_cast<const uint8_t*>(&b), 256);
  for (int e = 0; e < 256; ++e) {
    const int g = e / 32, run = e / 8, l = run % 4, j = e % 8;
    const int m = l == 1 ? entry1[j] : l == 2 ? entry255[j] : 8;
    const float db = 0.5f * (0.5f + static_cast<float>(15 - g)) * 0.25f;
    const float mag = db * static_cast<float>(m);
    CHECK_EQ(y[static_cast<std::size_t>(e)], negated(static_cast<unsigned>(run % 128), j) ? -mag : mag);
  }
}

TEST(iq2_xs_hand_built_block) {
  // Runs alternate codebook entries 0 (all 8) and 511 (all 43); run k has sign field k; the
  // 16-value half h has scale nibble h % 16 → multiplier (0.5 + nibble) / 4.
  BlockIQ2_XS b{};
  b.d = strata::fp32_to_fp16(2.0f);
  for (int k = 0; k < 32; ++k) b.qs[k] = static_cast<uint16_t>((k % 2 ? 511 : 0) | (k << 9));
  for (int g = 0; g < 8; ++g) b.scales[g] = static_cast<uint8_t>((2 * g) | ((2 * g + 1) << 4));
  const auto y = dequant(GGMLType::IQ2_XS, reinterpret_cast<const uint8_t*>(&b), 256);
  for (int e = 0; e < 256; ++e) {
    const int k = e / 8, j = e % 8, h = e / 16;
    const float mag = (2.0f * (0.5f + static_cast<float>(h)) * 0.25f) * (k % 2 ? 43.0f : 8.0f);
    CHECK_EQ(y[static_cast<std::size_t>(e)], negated(static_cast<unsigned>(k), j) ? -mag : mag);
  }
}

TEST(iq2_s_hand_built_block) {
  // Run k uses entry 0, 1023, 256, 767 for k % 4 = 0, 1, 2, 3: low bytes 0, 255, 0, 255 in qs and
  // top bits 0, 3, 1, 2 in qh[k / 4] (0x9C). Sign byte k is 9k mod 256 (8 free bits: bit j negates
  // element 8k + j); the 16-value half h has scale nibble h → multiplier (0.5 + h) / 4.
  BlockIQ2_S b{};
  b.d = strata::fp32_to_fp16(2.0f);
  for (int k = 0; k < 32; ++k) {
    b.qs[k] = k % 2 ? 255 : 0;
    b.signs[k] = static_cast<uint8_t>(9 * k);
  }
  for (uint8_t& h : b.qh) h = 0x9C;
  for (int g = 0; g < 8; ++g) b.scales[g] = static_cast<uint8_t>((2 * g) | ((2 * g + 1) << 4));
  const int entries[4][8] = {{8, 8, 8, 8, 8, 8, 8, 8},
                             {43, 43, 43, 43, 43, 43, 43, 43},
                             {25, 25, 25, 25, 25, 8, 25, 8},
                             {25, 25, 8, 25, 8, 8, 43, 25}};
  const auto y = dequant(GGMLType::IQ2_S, reinterpret_cast<const uint8_t*>(&b), 256);
  for (int e = 0; e < 256; ++e) {
    const int k = e / 8, j = e % 8, h = e / 16;
    const float mag = (2.0f * (0.5f + static_cast<float>(h)) * 0.25f) * static_cast<float>(entries[k % 4][j]);
    CHECK_EQ(y[static_cast<std::size_t>(e)], ((9 * k) >> j) & 1 ? -mag : mag);
  }
}

TEST(iq3_xxs_hand_built_block) {
  // Group g: entries alternate 0 (4 4 4 4) and 255 (4 28 52 62); scale nibble g + 3; the four
  // sign fields of group g are 4g .. 4g+3.
  BlockIQ3_XXS b{};
  b.d = strata::fp32_to_fp16(0.25f);
  for (int k = 0; k < 64; ++k) b.qs[k] = k % 2 ? 255 : 0;
  for (int g = 0; g < 8; ++g) {
    uint32_t aux = static_cast<uint32_t>(g + 3) << 28;
    for (int l = 0; l < 4; ++l) aux |= static_cast<uint32_t>(4 * g + l) << (7 * l);
    std::memcpy(b.qs + 64 + 4 * g, &aux, 4);
  }
  const int e255[4] = {4, 28, 52, 62};
  const auto y = dequant(GGMLType::IQ3_XXS, reinterpret_cast<const uint8_t*>(&b), 256);
  for (int e = 0; e < 256; ++e) {
    const int g = e / 32, run = e / 8, j = e % 8, entry = (e / 4) % 2;
    const float db = 0.25f * (0.5f + static_cast<float>(g + 3)) * 0.5f;
    const float mag = db * static_cast<float>(entry ? e255[e % 4] : 4);
    CHECK_EQ(y[static_cast<std::size_t>(e)], negated(static_cast<unsigned>(run % 128), j) ? -mag : mag);
  }
}

TEST(iq3_s_hand_built_block) {
  // Per group of 32 (8 grid indices k): even k use entry 1 (qs 1); odd k have their ninth bit set
  // (qh = 0xAA) and use entry 256 (qs 0) or 511 (qs 255). Sign byte r is 9r mod 256 (8 free bits:
  // bit j negates element 8r + j); group g's scale nibble is 15 - g, multiplier 1 + 2 (15 - g).
  BlockIQ3_S b{};
  b.d = strata::fp32_to_fp16(0.5f);
  for (int k = 0; k < 64; ++k) b.qs[k] = k % 2 == 0 ? 1 : k % 4 == 1 ? 0 : 255;
  for (uint8_t& h : b.qh) h = 0xAA;
  for (int r = 0; r < 32; ++r) b.signs[r] = static_cast<uint8_t>(9 * r);
  for (int g = 0; g < 8; ++g) b.scales[g / 2] = static_cast<uint8_t>(b.scales[g / 2] | ((15 - g) << (4 * (g % 2))));
  const int entry1[4] = {3, 1, 1, 1}, entry256[4] = {7, 5, 9, 5}, entry511[4] = {1, 1, 15, 15};
  const auto y = dequant(GGMLType::IQ3_S, reinterpret_cast<const uint8_t*>(&b), 256);
  for (int e = 0; e < 256; ++e) {
    const int g = e / 32, r = e / 8, k = e / 4;
    const int* entry = k % 2 == 0 ? entry1 : k % 4 == 1 ? entry256 : entry511;
    const float mag = (0.5f * static_cast<float>(1 + 2 * (15 - g))) * static_cast<float>(entry[e % 4]);
    CHECK_EQ(y[static_cast<std::size_t>(e)], ((9 * r) >> (e % 8)) & 1 ? -mag : mag);
  }
}

TEST(iq1_s_hand_built_block) {
  // Run k uses entry 0 (eight −1), 1 (+1 then seven −1), 256 or 2047 (eight +1) for k % 4 = 0..3:
  // qs 0, 1, 0, 255 and top bits 0, 0, 1, 7 in qh[k / 4]. Group g's scale is 7 − g (multiplier
  // 2 (7 − g) + 1), its delta negative for odd g.
  BlockIQ1_S b{};
  b.d = strata::fp32_to_fp16(0.5f);
  for (int k = 0; k < 32; ++k) b.qs[k] = k % 4 == 1 ? 1 : k % 4 == 3 ? 255 : 0;
  for (int g = 0; g < 8; ++g) b.qh[g] = static_cast<uint16_t>((1 << 6) | (7 << 9) | ((7 - g) << 12) | ((g % 2) << 15));
  const int entry256[8] = {-1, 0, 1, 0, 1, -1, 0, -1};
  const auto y = dequant(GGMLType::IQ1_S, reinterpret_cast<const uint8_t*>(&b), 256);
  for (int e = 0; e < 256; ++e) {
    const int g = e / 32, k = e / 8, j = e % 8;
    const int v = k % 4 == 0 ? -1 : k % 4 == 1 ? (j == 0 ? 1 : -1) : k % 4 == 2 ? entry256[j] : 1;
    const float dl = 0.5f * static_cast<float>(2 * (7 - g) + 1);
    CHECK_EQ(y[static_cast<std::size_t>(e)], dl * (static_cast<float>(v) + (g % 2 ? -0.125f : 0.125f)));
  }
}

TEST(iq1_m_hand_built_block) {
  // Runs use entries 0, 1, 256, 2047 as in the IQ1_S block (their top bits in nibble k % 2 of
  // qh[k / 2]); run k's delta is negative when k % 3 == 0 (bit 3 of its nibble). Half h's scale is
  // h % 8; d = 0.25 (fp16 0x3400) is spread over the top nibbles of the scale words, lowest first.
  BlockIQ1_M b{};
  const uint16_t d = strata::fp32_to_fp16(0.25f);
  const int top[4] = {0, 0, 1, 7};
  for (int k = 0; k < 32; ++k) {
    b.qs[k] = k % 4 == 1 ? 1 : k % 4 == 3 ? 255 : 0;
    const int nibble = top[k % 4] | (k % 3 == 0 ? 8 : 0);
    b.qh[k / 2] = static_cast<uint8_t>(b.qh[k / 2] | (nibble << (4 * (k % 2))));
  }
  for (int w = 0; w < 4; ++w) {
    int word = ((d >> (4 * w)) & 0xF) << 12;
    for (int r = 0; r < 4; ++r) word |= ((4 * w + r) % 8) << (3 * r);
    b.scales[w] = static_cast<uint16_t>(word);
  }
  const int entry256[8] = {-1, 0, 1, 0, 1, -1, 0, -1};
  const auto y = dequant(GGMLType::IQ1_M, reinterpret_cast<const uint8_t*>(&b), 256);
  for (int e = 0; e < 256; ++e) {
    const int h = e / 16, k = e / 8, j = e % 8;
    const int v = k % 4 == 0 ? -1 : k % 4 == 1 ? (j == 0 ? 1 : -1) : k % 4 == 2 ? entry256[j] : 1;
    const float dl = 0.25f * static_cast<float>(2 * (h % 8) + 1);
    CHECK_EQ(y[static_cast<std::size_t>(e)], dl * (static_cast<float>(v) + (k % 3 == 0 ? -0.125f : 0.125f)));
  }
}

TEST(sign_masks_agree_with_the_sign_table) {
  for (unsigned i = 0; i < 128; ++i)
    for (int j = 0; j < 8; ++j) {
      const bool table = (kIQSigns[i] >> j) & 1u;
      CHECK_EQ(table, negated(i, j));
      CHECK_EQ(((kIQSignMasks[i] >> (8 * j)) & 0xFF) == 0xFF, table);
      CHECK_EQ((kIQSignMasks[i] >> (8 * j)) & 0x7F, table ? 0x7Fu : 0u);
    }
}

TEST(short_rows_are_clear_errors) {
  float y[256];
  BlockQ3_K b{};
  for (GGMLType t : {GGMLType::Q3_K, GGMLType::Q5_K, GGMLType::IQ2_XXS, GGMLType::IQ2_XS, GGMLType::IQ2_S,
                     GGMLType::IQ3_XXS, GGMLType::IQ3_S, GGMLType::IQ1_S, GGMLType::IQ1_M}) {
    try {
      dequantize_row(t, &b, y, 128);
      CHECK(false);
    } catch (const strata::Error& e) {
      CHECK(e.kind() == strata::ErrorKind::Value);
      CHECK(std::string(e.what()).find(type_name(t)) != std::string::npos);
    }
  }
}
