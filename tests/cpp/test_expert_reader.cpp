// ExpertReader: aligned direct reads land the wanted bytes at dst + head, buffered and direct agree,
// the fallback when direct reads are refused, short reads continued, faults and truncation as
// Error(IO) naming the file and the expert; and the STRATA_EXPERT_* settings parser.
#define STRATA_TEST_MAIN
#include <cerrno>
#include <cstdlib>
#include <optional>
#include <random>
#include <string>

#include "check.h"
#include "strata/config/settings.h"
#include "strata/experts/expert_reader.h"
#include "strata/util/error.h"
#include "test_expert_fixture.h"

using namespace strata;
using namespace strata::experts;
using strata::config::parse_cache_size;
using strata_test::file_byte;
using strata_test::TempFile;

namespace {

struct Region {
  explicit Region(std::size_t n) : n_(n), p(static_cast<uint8_t*>(std::aligned_alloc(ExpertReader::kAlign, n))) {
    std::memset(p, 0xEE, n);
  }
  ~Region() { std::free(p); }
  std::size_t n_;
  uint8_t* p;
};

bool lands(const uint8_t* dst, uint64_t off, std::size_t len) {
  const uint8_t* at = dst + ExpertReader::head(off);
  for (std::size_t i = 0; i < len; ++i)
    if (at[i] != file_byte(off + i)) return false;
  return true;
}

std::string error_text(const std::function<void()>& fn, ErrorKind* kind) {
  try {
    fn();
  } catch (const Error& e) {
    *kind = e.kind();
    return e.what();
  }
  return "";
}

bool contains(const std::string& s, const std::string& what) { return s.find(what) != std::string::npos; }

}  // namespace

TEST(span_and_head) {
  CHECK_EQ(ExpertReader::head(0), 0u);
  CHECK_EQ(ExpertReader::head(4097), 1u);
  CHECK_EQ(ExpertReader::span(0, 4096), 4096u);
  CHECK_EQ(ExpertReader::span(1, 4096), 8192u);
  CHECK_EQ(ExpertReader::span(4095, 1), 4096u);
  CHECK_EQ(ExpertReader::span(4095, 2), 8192u);
}

TEST(direct_and_buffered_reads_land_exactly) {
  TempFile f(300000);
  std::mt19937 g(1);
  for (DirectIo mode : {DirectIo::Auto, DirectIo::Off}) {
    ExpertReader r(f.path(), mode);
    CHECK_EQ(r.file_size(), 300000u);
    if (mode == DirectIo::Off) CHECK(!r.direct());
    for (int t = 0; t < 200; ++t) {
      const uint64_t off = g() % 290000;
      const std::size_t len = 1 + g() % std::min<uint64_t>(9000, 300000 - off);
      Region dst(ExpertReader::span(off, len));
      const uint64_t io = r.read(off, len, dst.p, ReadWhat{});
      CHECK(lands(dst.p, off, len));
      if (r.direct())
        CHECK(io >= len && io <= ExpertReader::span(off, len));
      else
        CHECK_EQ(io, len);
    }
    // The last bytes of the file: the aligned span runs past the end, which direct I/O reports as a
    // short read at end of file — not an error, the wanted bytes are all there.
    Region dst(ExpertReader::span(299990, 10));
    r.read(299990, 10, dst.p, ReadWhat{});
    CHECK(lands(dst.p, 299990, 10));
  }
  ExpertReader r(f.path(), DirectIo::Auto);
  std::printf("reader on %s: %s\n", f.path().c_str(), r.note().c_str());
}

TEST(falls_back_when_direct_reads_are_refused) {
  TempFile f(50000);
  ExpertReader r(f.path(), DirectIo::Auto);
  if (!r.direct()) {
    std::printf("direct I/O unavailable here (%s): fallback at open already exercised\n", r.note().c_str());
    CHECK(contains(r.note(), "buffered"));
    return;
  }
  int direct_calls = 0;
  r.set_pread_hook([&](int fd, void* buf, std::size_t n, uint64_t off, bool direct) -> ssize_t {
    if (direct) {
      ++direct_calls;
      errno = EINVAL;
      return -1;
    }
    return ::pread(fd, buf, n, static_cast<off_t>(off));
  });
  Region dst(ExpertReader::span(777, 5000));
  r.read(777, 5000, dst.p, ReadWhat{});
  CHECK(lands(dst.p, 777, 5000));
  CHECK(!r.direct());
  CHECK(contains(r.note(), "direct read refused"));
  r.read(777, 5000, dst.p, ReadWhat{});  // no second direct attempt
  CHECK_EQ(direct_calls, 1);

  // DirectIo::On never falls back.
  ExpertReader strict(f.path(), DirectIo::On);
  strict.set_pread_hook([](int, void*, std::size_t, uint64_t, bool) -> ssize_t {
    errno = EINVAL;
    return -1;
  });
  ErrorKind kind = ErrorKind::Internal;
  const std::string msg = error_text([&] { strict.read(777, 5000, dst.p, ReadWhat{1, 2, "ffn_gate_exps"}); }, &kind);
  CHECK(kind == ErrorKind::IO);
  CHECK(contains(msg, "Invalid argument"));
}

TEST(short_reads_are_continued) {
  TempFile f(100000);
  for (DirectIo mode : {DirectIo::Auto, DirectIo::Off}) {
    ExpertReader r(f.path(), mode);
    int calls = 0;
    // Direct: stop at a block boundary (continued directly) or mid-block (finished buffered);
    // buffered: 1..97 bytes at a time.
    r.set_pread_hook([&](int fd, void* buf, std::size_t n, uint64_t off, bool direct) -> ssize_t {
      ++calls;
      std::size_t m = n;
      if (direct)
        m = calls % 2 ? std::min<std::size_t>(n, 4096) : std::min<std::size_t>(n, 5000);
      else
        m = std::min<std::size_t>(n, 1 + static_cast<std::size_t>(calls) % 97);
      // Read what was asked (O_DIRECT lengths must stay aligned) but report fewer bytes.
      const ssize_t got = ::pread(fd, buf, n, static_cast<off_t>(off));
      return got < 0 ? got : std::min<ssize_t>(got, static_cast<ssize_t>(m));
    });
    Region dst(ExpertReader::span(1234, 30000));
    r.read(1234, 30000, dst.p, ReadWhat{});
    CHECK(lands(dst.p, 1234, 30000));
    CHECK(calls > 2);
  }
}

TEST(faults_are_io_errors_naming_the_expert) {
  TempFile f(100000);
  for (DirectIo mode : {DirectIo::Auto, DirectIo::Off}) {
    ExpertReader r(f.path(), mode);
    r.set_pread_hook([](int, void*, std::size_t, uint64_t, bool) -> ssize_t {
      errno = EIO;
      return -1;
    });
    Region dst(ExpertReader::span(5000, 1000));
    ErrorKind kind = ErrorKind::Internal;
    std::string msg = error_text([&] { r.read(5000, 1000, dst.p, ReadWhat{1, 3, "ffn_up_exps"}); }, &kind);
    CHECK(kind == ErrorKind::IO);
    CHECK(contains(msg, f.path()));
    CHECK(contains(msg, "expert 3 of layer 1 (ffn_up_exps"));
    CHECK(contains(msg, "1000 bytes at offset 5000"));
    CHECK(contains(msg, "Input/output error"));

    // EOF in the middle (a reader returning 0 early).
    r.set_pread_hook([](int fd, void* buf, std::size_t n, uint64_t off, bool) -> ssize_t {
      if (off >= 5500) return 0;
      return ::pread(fd, buf, std::min<std::size_t>(n, 5500 - off), static_cast<off_t>(off));
    });
    msg = error_text([&] { r.read(5000, 1000, dst.p, ReadWhat{0, 7, "ffn_down_exps"}); }, &kind);
    CHECK(kind == ErrorKind::IO);
    CHECK(contains(msg, "unexpected end of file"));
    CHECK(contains(msg, "expert 7 of layer 0"));
  }
}

TEST(truncated_file_is_an_error) {
  TempFile f(100000);
  for (DirectIo mode : {DirectIo::Auto, DirectIo::Off}) {
    ExpertReader r(f.path(), mode);
    f.truncate(60000);
    Region dst(ExpertReader::span(59000, 4000));
    ErrorKind kind = ErrorKind::Internal;
    const std::string msg = error_text([&] { r.read(59000, 4000, dst.p, ReadWhat{2, 5, "ffn_gate_exps"}); }, &kind);
    CHECK(kind == ErrorKind::IO);
    CHECK(contains(msg, "unexpected end of file after 1000 bytes"));
    CHECK(contains(msg, "truncated"));
  }
}

TEST(missing_file) { CHECK_THROWS(ExpertReader("/nonexistent/strata-model.gguf", DirectIo::Auto)); }

TEST(cache_size_parser) {
  auto bytes = [](const char* s) {
    return parse_cache_size(s).value ? parse_cache_size(s).value->bytes : ~uint64_t{0};
  };
  auto frac = [](const char* s) { return parse_cache_size(s).value ? parse_cache_size(s).value->fraction : -1.0; };
  CHECK_EQ(bytes("0"), 0u);
  CHECK_EQ(bytes("123456"), 123456u);
  CHECK_EQ(bytes("512M"), 512ull << 20);
  CHECK_EQ(bytes("2g"), 2ull << 30);
  CHECK_EQ(bytes("1.5GiB"), 3ull << 29);
  CHECK_EQ(bytes("64kb"), 64ull << 10);
  CHECK_EQ(bytes(" 3 T "), 3ull << 40);
  CHECK_NEAR(frac("25%"), 0.25, 1e-12);
  CHECK_NEAR(frac("100%"), 1.0, 1e-12);
  for (const char* bad : {"", "abc", "-5M", "0%", "101%", "12Q", "1e30G", "0.1", "nan", "5%%"})
    CHECK_MSG(!parse_cache_size(bad).value, bad);
}

// The expert group of the one settings parser (config/settings.h).
struct ExpertParse {
  config::ExpertSettings config;
  std::optional<std::string> diagnostic;
};
static ExpertParse parse_expert_settings(const config::EnvMap& env) {
  const config::ParseResult p = config::parse_settings(env);
  ExpertParse r{p.settings.experts, std::nullopt};
  for (const std::string& d : p.diagnostics)
    if (d.rfind("STRATA_EXPERT_", 0) == 0) r.diagnostic = d;
  return r;
}

TEST(settings_group) {
  config::EnvMap env{{"STRATA_EXPERT_MODE", "stream"},
                     {"STRATA_EXPERT_CACHE", "30%"},
                     {"STRATA_EXPERT_DIRECT_IO", "off"},
                     {"STRATA_EXPERT_IO_THREADS", "2"}};
  ExpertParse r = parse_expert_settings(env);
  CHECK(!r.diagnostic);
  CHECK(r.config.mode == ExpertMode::Stream);
  CHECK_NEAR(r.config.cache_fraction, 0.3, 1e-12);
  CHECK(r.config.direct_io == DirectIo::Off);
  CHECK_EQ(r.config.io_threads, 2);
  // One bad value rejects the group: defaults, one diagnostic naming the variable.
  env["STRATA_EXPERT_IO_THREADS"] = "99";
  r = parse_expert_settings(env);
  CHECK(r.diagnostic.has_value());
  CHECK(contains(*r.diagnostic, "STRATA_EXPERT_IO_THREADS"));
  CHECK(r.config.mode == ExpertMode::Mmap);
  CHECK_EQ(r.config.io_threads, 4);
  r = parse_expert_settings({{"STRATA_EXPERT_MODE", "ssd"}});
  CHECK(r.diagnostic && contains(*r.diagnostic, "'ssd' is not mmap or stream"));
  r = parse_expert_settings({});
  CHECK(!r.diagnostic && r.config.mode == ExpertMode::Mmap && r.config.cache_bytes == 0);
}
