// The GGUF reader on files built in memory: every value type, tensors and their bytes, getters'
// conversions and errors, and malformed files each refused with a message naming the problem.
#define STRATA_TEST_MAIN
#include "check.h"

#include <chrono>
#include <cstdio>
#include <filesystem>
#include <fstream>

#include "../fuzz/gguf_builder.h"
#include "strata/gguf/gguf_file.h"
#include "strata/util/error.h"

using namespace strata_gguf_build;
using strata::gguf::File;

namespace {

std::string write_temp(const std::vector<uint8_t>& bytes, const std::string& name) {
  const auto dir = std::filesystem::temp_directory_path() / "strata_test_gguf";
  std::filesystem::create_directories(dir);
  const auto path = (dir / name).string();
  std::ofstream(path, std::ios::binary)
      .write(reinterpret_cast<const char*>(bytes.data()), static_cast<std::streamsize>(bytes.size()));
  return path;
}

// The Format error opening `bytes` raises ("" when it opens).
std::string open_error(const std::vector<uint8_t>& bytes) {
  try {
    (void)File::open_memory(bytes.data(), bytes.size(), "mem.gguf");
  } catch (const strata::Error& e) {
    if (e.kind() != strata::ErrorKind::Format) return std::string("wrong kind: ") + e.what();
    return e.what();
  }
  return "";
}

void expect_error(const std::vector<uint8_t>& bytes, const std::string& phrase) {
  const std::string msg = open_error(bytes);
  CHECK_MSG(msg.rfind("mem.gguf: ", 0) == 0, "message does not start with the name: '" + msg + "'");
  CHECK_MSG(msg.find(phrase) != std::string::npos, "expected '" + phrase + "' in '" + msg + "'");
  CHECK_MSG(msg.find('\n') == std::string::npos, "multi-line message: " + msg);
}

template <class T>
void poke(std::vector<uint8_t>& b, std::size_t at, T v) {
  std::memcpy(b.data() + at, &v, sizeof(T));
}

template <class F>
std::string error_of(F&& f) {
  try {
    f();
  } catch (const strata::Error& e) {
    return e.what();
  }
  return "";
}

}  // namespace

TEST(rich_file_values) {
  const Blob blob = rich_file().build();
  const auto f = File::open(write_temp(blob.bytes, "rich.gguf"));
  CHECK_EQ(f->version(), 3u);
  CHECK_EQ(f->alignment(), 32u);
  CHECK_EQ(f->size(), blob.bytes.size());
  CHECK(f->get_string("general.architecture") == "strata");
  CHECK_EQ(f->get_u32("t.u8"), 200u);
  CHECK_EQ(f->get_i32("t.i8"), -100);
  CHECK_EQ(f->get_u32("t.u16"), 60000u);
  CHECK_EQ(f->get_i64("t.i16"), -30000);
  CHECK_EQ(f->get_u32("t.u32"), 4000000000u);
  CHECK_EQ(f->get_i32("t.i32"), -2000000000);
  CHECK_EQ(f->get_f32("t.f32"), 0.5f);
  CHECK(f->get_bool("t.bool"));
  CHECK(f->get_string("t.str") == "h\xc3\xa9llo");
  CHECK_EQ(f->get_u64("t.u64"), ~uint64_t{0});
  CHECK_EQ(f->get_i64("t.i64"), -(int64_t{1} << 40));
  CHECK_EQ(f->get_f64("t.f64"), -2.25);
  CHECK_EQ(f->get_f32("t.u64"), 18446744073709551616.0f);  // integers convert to float
  CHECK_EQ(f->get_f32("t.i16"), -30000.0f);
  CHECK(f->type_of("t.f64") == strata::gguf::ValueType::FLOAT64);
  const auto tokens = f->get_string_array("tokenizer.ggml.tokens");
  CHECK_EQ(tokens.size(), 40u);
  CHECK(tokens[39] == "tok39");
  const auto types = f->get_i32_array("tokenizer.ggml.token_type");
  CHECK(types == (std::vector<int32_t>{1, 3, -1}));
  CHECK(f->get_f32_array("t.f32s") == (std::vector<float>{1.5f, -2.0f}));
  CHECK(error_of([&] { (void)f->get_u64("t.empty", 7); }).find("has type array[uint64], expected uint64") !=
        std::string::npos);
  CHECK_EQ(f->value("t.empty").size(), 0u);
  CHECK(f->value("t.empty").type_description() == "array[uint64]");
  // Nested arrays walk element by element.
  const auto& nested = f->value("t.nested");
  CHECK(nested.type_description() == "array[array]");
  std::vector<std::string> seen;
  nested.for_each([&](const strata::gguf::Value& inner) {
    seen.push_back(inner.type_description());
    inner.for_each([&](const strata::gguf::Value& e) {
      seen.push_back(e.type() == strata::gguf::ValueType::STRING ? std::string(e.to_string())
                                                                 : std::to_string(*e.to_u64()));
    });
  });
  CHECK(seen == (std::vector<std::string>{"array[uint16]", "1", "2", "array[string]", "a", ""}));
  // Keys in file order.
  CHECK(f->metadata().front().key == "general.architecture");
  CHECK(f->metadata().back().key == "t.nested");
  CHECK(std::isinf(f->get_f32("t.f64big")));
  CHECK_EQ(f->mapping().size(), blob.bytes.size());
}

TEST(float_getters_saturate) {
  Builder b;
  b.kv("big", v_f64(1e300)).kv("small", v_f64(-1e300)).kv("arr", v_array(ValueType::FLOAT64, {v_f64(1e300)}));
  const Blob blob = b.build();
  const auto f = File::open_memory(blob.bytes.data(), blob.bytes.size(), "f.gguf");
  CHECK(std::isinf(f->get_f32("big")) && f->get_f32("big") > 0);
  CHECK(std::isinf(f->get_f32("small")) && f->get_f32("small") < 0);
  CHECK(std::isinf(f->get_f32_array("arr")[0]));
}

TEST(getter_errors_and_defaults) {
  const auto f = File::open_memory(rich_file().build().bytes.data(), rich_file().build().bytes.size(), "r.gguf");
  CHECK_EQ(f->get_u32("absent", 9u), 9u);
  CHECK_EQ(f->get_f32("absent", 1.25f), 1.25f);
  CHECK(f->get_bool("absent", true));
  CHECK(f->get_string("absent", "x") == "x");
  CHECK(error_of([&] { (void)f->get_u32("absent"); }) == "r.gguf: key 'absent' missing");
  CHECK(error_of([&] { (void)f->get_u32("t.str"); }) == "r.gguf: key 't.str' has type string, expected uint32");
  CHECK(error_of([&] { (void)f->get_u32("t.i8"); }) == "r.gguf: key 't.i8' = -100 does not fit in uint32");
  CHECK(error_of([&] { (void)f->get_i32("t.u32"); }) == "r.gguf: key 't.u32' = 4000000000 does not fit in int32");
  CHECK(error_of([&] { (void)f->get_string("t.u8"); }) == "r.gguf: key 't.u8' has type uint8, expected string");
  CHECK(error_of([&] { (void)f->get_string_array("t.f32s"); }) ==
        "r.gguf: key 't.f32s' has type array[float32], expected array[string]");
  CHECK(error_of([&] { (void)f->get_i32_array("tokenizer.ggml.tokens"); }).find("expected an integer array") !=
        std::string::npos);
  CHECK(error_of([&] { (void)f->get_u32_array("tokenizer.ggml.token_type"); }) ==
        "r.gguf: key 'tokenizer.ggml.token_type'[2] = -1 does not fit in uint32");
  // A present key of the wrong type still throws with a default.
  CHECK(!error_of([&] { (void)f->get_u32("t.str", 1u); }).empty());
  CHECK(error_of([&] { (void)f->mapping(); }).find("opened from memory") != std::string::npos);
}

TEST(tensors_and_bytes) {
  Builder b = rich_file();
  uint64_t data_offset = 0;
  const Blob blob = b.build(&data_offset);
  const auto f = File::open_memory(blob.bytes.data(), blob.bytes.size(), "t.gguf");
  CHECK_EQ(f->data_offset(), data_offset);
  CHECK_EQ(f->tensors().size(), b.tensors().size());
  for (std::size_t i = 0; i < b.tensors().size(); ++i) {
    const auto& t = f->tensors()[i];
    CHECK(t.name == b.tensors()[i].name);
    CHECK(t.type == b.tensors()[i].type);
    CHECK(t.ne == b.tensors()[i].ne);
    CHECK_EQ(t.nbytes, tensor_nbytes(b.tensors()[i]));
    CHECK_EQ(t.offset % 32, 0u);
    const uint8_t* p = f->tensor_data(t);
    bool same = true;
    for (uint64_t k = 0; k < t.nbytes; ++k) same = same && p[k] == tensor_byte(i, k);
    CHECK_MSG(same, t.name);
  }
  CHECK_EQ(f->find_tensor("blk.0.ffn_down.weight")->nbytes, 2u * 2 * 34);
  CHECK_EQ(f->find_tensor("blk.0.ffn_up.weight")->n_elements(), 512);
  CHECK_EQ(f->find_tensor("scalar")->n_elements(), 1);
  CHECK(f->find_tensor("nope") == nullptr);
}

TEST(alignments_versions_and_empty) {
  for (uint32_t a : {1u, 8u, 64u, 4096u}) {
    const Blob blob = rich_file(a).build();
    const auto f = File::open_memory(blob.bytes.data(), blob.bytes.size(), "a.gguf");
    CHECK_EQ(f->alignment(), a);
    CHECK_EQ(f->data_offset() % a, 0u);
    for (const auto& t : f->tensors()) CHECK_EQ(t.offset % a, 0u);
  }
  Builder v2(2);
  v2.kv("general.architecture", v_str("x")).tensor("w", GGMLType::F32, {2});
  const Blob b2 = v2.build();
  CHECK_EQ(File::open_memory(b2.bytes.data(), b2.bytes.size(), "v2.gguf")->version(), 2u);
  // No tensors, and a file that ends right after the metadata (no padding) still opens.
  Builder none;
  none.kv("general.architecture", v_str("x"));
  Blob b3 = none.build();
  const auto f3 = File::open_memory(b3.bytes.data(), b3.bytes.size(), "e.gguf");
  CHECK(f3->tensors().empty());
  const std::size_t unpadded = 4 + 4 + 8 + 8 + 8 + 20 + 4 + 8 + 1;
  b3.bytes.resize(unpadded);
  CHECK(open_error(b3.bytes).empty());
}

TEST(malformed_header) {
  const std::vector<uint8_t> good = rich_file().build().bytes;
  expect_error({}, "empty file");
  expect_error({'G', 'G'}, "file truncated: GGUF magic needs 4 bytes but only 2 remain");
  auto b = good;
  b[0] = 'X';
  expect_error(b, "not a GGUF file (magic bytes 58 47 55 46");
  b = good;
  poke<uint32_t>(b, 4, 0x03000000u);
  expect_error(b, "big-endian GGUF");
  b = good;
  poke<uint32_t>(b, 4, 1u);
  expect_error(b, "GGUF version 1 is not supported");
  b = good;
  poke<uint32_t>(b, 4, 7u);
  expect_error(b, "unsupported GGUF version 7 (strata reads versions 2 and 3) (at byte offset 4)");
  expect_error(std::vector<uint8_t>(good.begin(), good.begin() + 12), "file truncated: tensor count needs 8");
  b = good;
  poke<uint64_t>(b, 16, uint64_t{1} << 60);
  expect_error(b, "metadata key-value count 1152921504606846976 exceeds the limit of 1048576");
  poke<uint64_t>(b, 16, 100000);
  expect_error(b, "metadata key-value count 100000 cannot fit in the");
  b = good;
  poke<uint64_t>(b, 8, ~uint64_t{0});
  expect_error(b, "tensor count 18446744073709551615 exceeds the limit of 1048576");
  poke<uint64_t>(b, 8, 1000);
  expect_error(b, "tensor count 1000 cannot fit in the");
}

TEST(malformed_metadata) {
  auto one = [](Val v, const std::string& key = "k") {
    Builder b;
    b.kv(key, std::move(v));
    return b.build().bytes;
  };
  auto b = one(v_str("abc"));
  poke<uint64_t>(b, 24 + 8 + 1 + 4, 1000);  // the string's length
  expect_error(b, "key 'k': string length 1000 exceeds the");
  b = one(v_u32(1));
  poke<uint32_t>(b, 24 + 8 + 1, 13);
  expect_error(b, "key 'k': unknown value type id 13 (at byte offset 33)");
  b = one(v_bool(true));
  b[24 + 8 + 1 + 4] = 2;
  expect_error(b, "key 'k': bool value 2 is not 0 or 1");
  b = one(v_array(ValueType::UINT32, {v_u32(1)}));
  poke<uint64_t>(b, 24 + 8 + 1 + 4 + 4, uint64_t{1} << 61);
  expect_error(b, "key 'k': array length 2305843009213693952 of uint32 cannot fit");
  b = one(v_array(ValueType::STRING, {v_str("a")}));
  poke<uint64_t>(b, 24 + 8 + 1 + 4 + 4, 1000);
  expect_error(b, "array length 1000 of string cannot fit");
  b = one(v_array(ValueType::UINT8, {v_u8(1)}));
  poke<uint32_t>(b, 24 + 8 + 1 + 4, 77);
  expect_error(b, "key 'k': unknown value type id 77");
  // Nesting deeper than the limit.
  Val deep = v_array(ValueType::UINT8, {v_u8(1)});
  for (int i = 0; i < strata::gguf::kMaxArrayDepth; ++i) deep = v_array(ValueType::ARRAY, {deep});
  expect_error(one(deep), "arrays nested deeper than 8 levels");
  Val ok = v_array(ValueType::UINT8, {v_u8(1)});
  for (int i = 0; i < strata::gguf::kMaxArrayDepth - 1; ++i) ok = v_array(ValueType::ARRAY, {ok});
  CHECK(open_error(one(ok)).empty());
  // Duplicate and empty keys; hostile key bytes are escaped.
  Builder dup;
  dup.kv("a", v_u8(1)).kv("a", v_u8(2));
  expect_error(dup.build().bytes, "duplicate key 'a'");
  expect_error(one(v_u8(1), ""), "metadata entry 0 has an empty key");
  expect_error(one(v_u8(1), std::string(70000, 'k')),
               "metadata entry 0: key of 70000 bytes exceeds the limit of 65535");
  b = one(v_u8(1), "bad\nkey");
  poke<uint32_t>(b, 24 + 8 + 7, 99);
  expect_error(b, "key 'bad\\x0akey': unknown value type id 99");
  // Truncated in the middle of a value.
  b = one(v_u64(5));
  b.resize(24 + 9 + 4 + 5);  // drop the padding and 3 bytes of the value
  expect_error(b, "file truncated: uint64 of key 'k' needs 8 bytes but only 5 remain");
}

TEST(malformed_alignment) {
  auto with = [](Val v) {
    Builder b;
    b.kv("general.alignment", std::move(v)).tensor("w", GGMLType::F32, {4});
    return b.build().bytes;
  };
  expect_error(with(v_u32(48)), "general.alignment 48 is not a power of two");
  expect_error(with(v_u32(0)), "general.alignment 0 is not a power of two");
  expect_error(with(v_u32(1u << 30)), "general.alignment 1073741824 exceeds the maximum");
  expect_error(with(v_str("32")), "general.alignment has type string, expected uint32");
  expect_error(with(v_i32(-32)), "general.alignment -32 is not a power of two");
}

TEST(malformed_tensors) {
  auto one = [](std::vector<int64_t> ne, GGMLType type = GGMLType::F32) {
    Builder b;
    b.tensor("w", type, std::move(ne));
    return b;
  };
  // Header 24, name 8+1, n_dims 4, dims 8*n, type 4, offset 8.
  auto b = one({4}).build().bytes;
  poke<uint32_t>(b, 24 + 9, 5);
  expect_error(b, "tensor 'w': n_dims 5 exceeds the maximum of 4");
  b = one({4, 2}).build().bytes;
  poke<int64_t>(b, 24 + 9 + 4 + 8, 0);
  expect_error(b, "tensor 'w': dimension 1 is 0, must be positive");
  poke<int64_t>(b, 24 + 9 + 4 + 8, -3);
  expect_error(b, "tensor 'w': dimension 1 is -3, must be positive");
  b = one({4, 2}).build().bytes;
  poke<int64_t>(b, 24 + 9 + 4, int64_t{1} << 40);
  poke<int64_t>(b, 24 + 9 + 4 + 8, int64_t{1} << 40);
  expect_error(b, "tensor 'w': element count overflows 64 bits");
  b = one({4}).build().bytes;
  poke<int64_t>(b, 24 + 9 + 4, int64_t{1} << 62);
  expect_error(b, "tensor 'w': size in bytes overflows 64 bits");
  b = one({4}).build().bytes;
  poke<uint32_t>(b, 24 + 9 + 4 + 8, 31);
  expect_error(b, "tensor 'w': unknown ggml type id 31");
  b = one({64, 2}, GGMLType::Q8_0).build().bytes;
  poke<int64_t>(b, 24 + 9 + 4, 33);
  expect_error(b, "tensor 'w': ne[0] = 33 is not a multiple of the Q8_0 block size 32");
  b = one({4}).build().bytes;
  poke<uint64_t>(b, 24 + 9 + 4 + 8 + 4, 16);
  expect_error(b, "tensor 'w': data offset 16 is not a multiple of the alignment 32");
  poke<uint64_t>(b, 24 + 9 + 4 + 8 + 4, 64);
  expect_error(b, "tensor 'w': data (16 bytes at data offset 64) extends past the end of the file");
  b = one({4}).build().bytes;
  b.resize(64 + 15);  // the data section starts at 64; the tensor needs 16 bytes
  expect_error(b, "tensor 'w': data (16 bytes at data offset 0) extends past the end of the file (79 bytes)");
  b = one({4}).build().bytes;
  poke<uint64_t>(b, 24 + 9 + 4 + 8 + 4, ~uint64_t{0} - 31);
  expect_error(b, "extends past the end of the file");
  Builder two;
  two.tensor("a", GGMLType::F32, {16}).tensor("b", GGMLType::F32, {4});
  b = two.build().bytes;
  const std::size_t b_info = 24 + 9 + 4 + 8 + 4 + 8;
  poke<uint64_t>(b, b_info + 9 + 4 + 8 + 4, 32);  // b starts inside a's 64 bytes
  expect_error(b, "tensors 'a' [");
  expect_error(b, "overlap");
  Builder dup;
  dup.tensor("a", GGMLType::F32, {4}).tensor("a", GGMLType::F32, {4});
  expect_error(dup.build().bytes, "duplicate tensor name 'a'");
  expect_error(Builder().tensor("", GGMLType::F32, {4}).build().bytes, "tensor 0 has an empty name");
  expect_error(Builder().tensor(std::string(65536, 'n'), GGMLType::F32, {4}).build().bytes,
               "tensor 0: name of 65536 bytes exceeds the limit of 65535");
  b = one({4, 4}).build().bytes;
  b.resize(24 + 9 + 4 + 8 + 3);
  expect_error(b, "file truncated: dimensions of tensor 'w' needs 8 bytes but only 3 remain");
  b = one({4}).build().bytes;
  poke<uint64_t>(b, 24, 1000);  // the name length
  expect_error(b, "name of tensor info 0: string length 1000 exceeds the");
}

TEST(real_file_errors_name_the_path) {
  CHECK(error_of([] { (void)File::open("/nonexistent/x.gguf"); }).rfind("/nonexistent/x.gguf: cannot open", 0) == 0);
  const std::string path = write_temp({'G', 'G', 'U', 'F', 3, 0, 0}, "trunc.gguf");
  CHECK(error_of([&] { (void)File::open(path); }) ==
        path + ": file truncated: GGUF version needs 4 bytes but only 3 remain (at byte offset 4)");
}

TEST(big_vocab_opens_fast) {
  Builder b;
  std::vector<Val> tokens;
  tokens.reserve(250000);
  for (int i = 0; i < 250000; ++i) tokens.push_back(v_str("token_" + std::to_string(i)));
  b.kv("tokenizer.ggml.tokens", v_array(ValueType::STRING, tokens));
  const Blob blob = b.build();
  const auto t0 = std::chrono::steady_clock::now();
  const auto f = File::open_memory(blob.bytes.data(), blob.bytes.size(), "vocab.gguf");
  const auto t1 = std::chrono::steady_clock::now();
  const auto toks = f->get_string_array("tokenizer.ggml.tokens");
  const auto t2 = std::chrono::steady_clock::now();
  CHECK_EQ(toks.size(), 250000u);
  CHECK(toks[249999] == "token_249999");
  std::printf("250k-token vocab: open %.2f ms, get_string_array %.2f ms\n",
              std::chrono::duration<double, std::milli>(t1 - t0).count(),
              std::chrono::duration<double, std::milli>(t2 - t1).count());
}
