// Standalone fuzz driver for the GGUF reader, built with the normal compiler and run by ctest.
// It runs the same entry as the libFuzzer target over seed files built in code and over
// deterministic random mutations of them: bit flips, byte stores, truncations, insertions and
// deletions, splices, and overwrites of the u64 length/count and u32 type fields.
//
//   fuzz_gguf_driver [--iterations N] [--seed S] [FILE...]
//   fuzz_gguf_driver --write-seeds DIR
//
// With FILEs it replays those inputs instead (e.g. a crash file from libFuzzer); --write-seeds
// writes the seed files into DIR as a starting corpus for the libFuzzer target. On a problem it
// writes the input to fuzz_gguf_failure.bin in the working directory and exits 1; on a crash a
// signal handler writes it to fuzz_gguf_crash.bin first.
#include <fcntl.h>
#include <unistd.h>

#include <csignal>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <iterator>
#include <map>
#include <random>
#include <string>
#include <vector>

#include "gguf_builder.h"
#include "gguf_fuzz_entry.h"

namespace {

using namespace strata_gguf_build;

struct Seed {
  std::string name;
  Blob blob;
};

std::vector<Seed> make_seeds() {
  std::vector<Seed> seeds;
  seeds.push_back({"rich", rich_file().build()});
  seeds.push_back({"rich_align1", rich_file(1).build()});
  seeds.push_back({"rich_align64", rich_file(64).build()});
  Builder no_tensors;
  no_tensors.kv("general.architecture", v_str("strata")).kv("x.n", v_u32(3));
  seeds.push_back({"no_tensors", no_tensors.build()});
  Builder v2(2);
  v2.kv("general.architecture", v_str("qwen3moe"))
      .kv("qwen3moe.expert_count", v_u32(8))
      .tensor("blk.0.ffn_gate_exps.weight", GGMLType::Q4_0, {32, 4, 8})
      .tensor("output.weight", GGMLType::BF16, {16, 10});
  seeds.push_back({"v2_experts", v2.build()});
  return seeds;
}

// ---- crash reporting: the input under test is written out by the signal handler.
const uint8_t* g_input = nullptr;
std::size_t g_input_size = 0;

void on_crash(int sig) {
  const int fd = ::open("fuzz_gguf_crash.bin", O_WRONLY | O_CREAT | O_TRUNC, 0644);
  if (fd >= 0) {
    ssize_t ignored = ::write(fd, g_input, g_input_size);
    (void)ignored;
    ::close(fd);
  }
  const char msg[] = "fuzz_gguf_driver: crashed; input written to fuzz_gguf_crash.bin\n";
  ssize_t ignored = ::write(2, msg, sizeof msg - 1);
  (void)ignored;
  std::signal(sig, SIG_DFL);
  std::raise(sig);
}

void save(const std::vector<uint8_t>& input, const char* path) {
  std::ofstream(path, std::ios::binary)
      .write(reinterpret_cast<const char*>(input.data()), static_cast<std::streamsize>(input.size()));
}

// ---- mutations (rng() % n keeps the sequence identical across standard libraries)
class Mutator {
 public:
  explicit Mutator(uint64_t seed) : rng_(seed) {}

  std::vector<uint8_t> mutate(const std::vector<Seed>& seeds) {
    const Seed& s = seeds[pick(seeds.size())];
    std::vector<uint8_t> b = s.blob.bytes;
    const int rounds = 1 + static_cast<int>(pick(3));
    for (int r = 0; r < rounds; ++r) apply(b, s.blob, seeds);
    return b;
  }

 private:
  uint64_t pick(uint64_t n) { return n ? rng_() % n : 0; }

  uint64_t interesting_u64(std::size_t size) {
    const uint64_t vals[] = {0, 1, 2, 3, 4, 7, 8, 31, 32, 33, 255, 256, 0x7fffffff, 0x80000000u, 0xffffffffu,
                             uint64_t{1} << 32, uint64_t{1} << 40, (uint64_t{1} << 62) + 1, uint64_t{1} << 63,
                             ~uint64_t{0}, ~uint64_t{0} - 31, size, size - 1, size + 1, size / 2};
    if (pick(4) == 0) return rng_();
    return vals[pick(std::size(vals))];
  }

  uint32_t interesting_u32() {
    const uint32_t vals[] = {0, 1, 2, 3, 4, 5, 7, 8, 9, 12, 13, 30, 31, 35, 39, 40, 64, 0x7fffffff, 0xffffffffu};
    if (pick(4) == 0) return static_cast<uint32_t>(rng_());
    return vals[pick(std::size(vals))];
  }

  template <class T>
  void store(std::vector<uint8_t>& b, std::size_t at, T v) {
    if (at + sizeof(T) <= b.size()) std::memcpy(b.data() + at, &v, sizeof(T));
  }

  void apply(std::vector<uint8_t>& b, const Blob& seed, const std::vector<Seed>& seeds) {
    if (b.empty()) return;
    switch (pick(9)) {
      case 0:  // bit flips
        for (uint64_t n = 1 + pick(8); n; --n) b[pick(b.size())] ^= static_cast<uint8_t>(1u << pick(8));
        break;
      case 1: {  // interesting bytes
        const uint8_t vals[] = {0, 1, 0x7f, 0x80, 0xff, 'G', 8, 9};
        for (uint64_t n = 1 + pick(4); n; --n) b[pick(b.size())] = vals[pick(std::size(vals))];
        break;
      }
      case 2:  // truncate
        b.resize(pick(b.size()));
        break;
      case 3:  // a length or count field
      case 4:
        if (!seed.u64_fields.empty())
          store(b, seed.u64_fields[pick(seed.u64_fields.size())], interesting_u64(b.size()));
        break;
      case 5:  // a type id, n_dims or version field
        if (!seed.u32_fields.empty()) store(b, seed.u32_fields[pick(seed.u32_fields.size())], interesting_u32());
        break;
      case 6: {  // insert random bytes
        const std::size_t at = pick(b.size() + 1);
        std::vector<uint8_t> extra(1 + pick(24));
        for (auto& x : extra) x = static_cast<uint8_t>(rng_());
        b.insert(b.begin() + static_cast<std::ptrdiff_t>(at), extra.begin(), extra.end());
        break;
      }
      case 7: {  // delete a chunk
        const std::size_t at = pick(b.size());
        const std::size_t n = std::min<std::size_t>(1 + pick(32), b.size() - at);
        b.erase(b.begin() + static_cast<std::ptrdiff_t>(at), b.begin() + static_cast<std::ptrdiff_t>(at + n));
        break;
      }
      default: {  // splice: our head, another seed's tail
        const auto& other = seeds[pick(seeds.size())].blob.bytes;
        const std::size_t cut = pick(b.size());
        const std::size_t from = pick(other.size());
        b.resize(cut);
        b.insert(b.end(), other.begin() + static_cast<std::ptrdiff_t>(from), other.end());
        break;
      }
    }
  }

  std::mt19937_64 rng_;
};

bool run_one(const std::vector<uint8_t>& input, const std::string& label, bool* parsed) {
  g_input = input.data();
  g_input_size = input.size();
  const std::string problem = strata_fuzz::check_gguf_input(input.data(), input.size(), parsed);
  if (problem.empty()) return true;
  save(input, "fuzz_gguf_failure.bin");
  std::fprintf(stderr, "fuzz_gguf_driver: %s: %s\n  input (%zu bytes) written to fuzz_gguf_failure.bin\n",
               label.c_str(), problem.c_str(), input.size());
  return false;
}

}  // namespace

int main(int argc, char** argv) {
  uint64_t iterations = 20000, seed = 1;
  std::vector<std::string> files;
  std::string seed_dir;
  for (int i = 1; i < argc; ++i) {
    const std::string a = argv[i];
    if (a == "--write-seeds" && i + 1 < argc) {
      seed_dir = argv[++i];
    } else if ((a == "--iterations" || a == "--seed") && i + 1 < argc) {
      (a == "--iterations" ? iterations : seed) = std::strtoull(argv[++i], nullptr, 10);
    } else if (a.rfind("--", 0) == 0) {
      std::fprintf(stderr, "usage: %s [--iterations N] [--seed S] [FILE...] | --write-seeds DIR\n", argv[0]);
      return 2;
    } else {
      files.push_back(a);
    }
  }
  for (int sig : {SIGSEGV, SIGBUS, SIGABRT, SIGFPE, SIGILL}) std::signal(sig, on_crash);

  if (!files.empty()) {  // replay
    for (const auto& path : files) {
      std::ifstream in(path, std::ios::binary);
      const std::vector<uint8_t> input((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
      bool parsed = false;
      if (!run_one(input, path, &parsed)) return 1;
      std::printf("%s: %s\n", path.c_str(), parsed ? "opens" : "refused cleanly");
    }
    return 0;
  }

  const std::vector<Seed> seeds = make_seeds();
  if (!seed_dir.empty()) {
    for (const auto& s : seeds) save(s.blob.bytes, (seed_dir + "/" + s.name + ".gguf").c_str());
    std::printf("wrote %zu seeds to %s\n", seeds.size(), seed_dir.c_str());
    return 0;
  }
  for (const auto& s : seeds) {
    bool parsed = false;
    if (!run_one(s.blob.bytes, "seed " + s.name, &parsed)) return 1;
    if (!parsed) {
      std::fprintf(stderr, "fuzz_gguf_driver: seed %s does not open\n", s.name.c_str());
      return 1;
    }
  }
  Mutator m(seed);
  uint64_t opened = 0;
  for (uint64_t i = 0; i < iterations; ++i) {
    bool parsed = false;
    if (!run_one(m.mutate(seeds), "iteration " + std::to_string(i), &parsed)) return 1;
    opened += parsed;
  }
  std::printf("fuzz_gguf_driver: %zu seeds + %llu mutations (seed %llu): %llu opened, %llu refused cleanly\n",
              seeds.size(), static_cast<unsigned long long>(iterations), static_cast<unsigned long long>(seed),
              static_cast<unsigned long long>(opened), static_cast<unsigned long long>(iterations - opened));
  return 0;
}
