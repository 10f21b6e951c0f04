// Decode and prefill through engine::Window with pools of several sizes and spin budgets, and what
// the pool does meanwhile (docs/benchmarks.md, "The thread pool").
//
//   pool_decode_bench --model PATH [--threads 1,2] [--spin-us 0,300] [--prompt N] [--tokens N]
//                     [--reps N] [--kv-type auto|f32|f16|int8]
//
// For every (threads, spin) configuration: its own ThreadPool and Window; a prompt of N tokens is
// prefilled once (timed: prefill tok/s), then each repetition rolls back to the prompt and decodes
// --tokens rows one at a time (LogitRows::Last, as a decode step). Configurations are interleaved
// within each repetition so that load from other processes falls on all alike; medians are
// reported. Per decode token: dispatches handed to the pool, condition-variable sleeps, context
// switches of the whole process (getrusage: voluntary + involuntary) and busy CPUs (CPU seconds /
// wall seconds). The weights are repacked first as an engine's are (STRATA_REPACK).
#include <sys/resource.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <memory>
#include <string>
#include <vector>

#include "strata/config/settings.h"
#include "strata/cpu/features.h"
#include "strata/cpu/repack/repack.h"
#include "strata/engine/prepared_model.h"
#include "strata/engine/window.h"
#include "strata/model/model.h"
#include "strata/model/weight_repack.h"
#include "strata/util/thread_pool.h"

using namespace strata;
using Clock = std::chrono::steady_clock;

namespace {

double median(std::vector<double> v) {
  if (v.empty()) return 0.0;
  std::sort(v.begin(), v.end());
  const std::size_t n = v.size();
  return n % 2 ? v[n / 2] : 0.5 * (v[n / 2 - 1] + v[n / 2]);
}

std::vector<int> int_list(const std::string& text) {
  std::vector<int> out;
  std::size_t at = 0;
  while (at <= text.size()) {
    const std::size_t comma = text.find(',', at);
    const std::string item = text.substr(at, comma == std::string::npos ? std::string::npos : comma - at);
    if (!item.empty()) out.push_back(std::atoi(item.c_str()));
    if (comma == std::string::npos) break;
    at = comma + 1;
  }
  return out;
}

struct Usage {
  double cpu_s = 0;
  long switches = 0;
};

Usage usage_now() {
  rusage u{};
  getrusage(RUSAGE_SELF, &u);
  Usage r;
  r.cpu_s = static_cast<double>(u.ru_utime.tv_sec + u.ru_stime.tv_sec) +
            1e-6 * static_cast<double>(u.ru_utime.tv_usec + u.ru_stime.tv_usec);
  r.switches = u.ru_nvcsw + u.ru_nivcsw;
  return r;
}

struct Config {
  int threads = 1;
  int spin_us = 0;
  std::unique_ptr<ThreadPool> pool;
  std::unique_ptr<engine::Window> window;
  std::vector<double> prefill_tok_s, decode_tok_s, dispatches, sleeps, switches, busy;
};

}  // namespace

int main(int argc, char** argv) {
  std::string path;
  std::vector<int> threads{1, 2}, spins{0, ThreadPool::kDefaultSpinMicros};
  int prompt = 128, tokens = 32, reps = 5;
  std::string kv_type = "auto";  // auto: what an engine's `kv_type` auto gives (engine::auto_cpu_kv_type)
  for (int i = 1; i < argc; ++i) {
    const std::string a = argv[i];
    auto next = [&]() -> std::string {
      if (i + 1 >= argc) {
        std::fprintf(stderr, "%s needs a value\n", a.c_str());
        std::exit(2);
      }
      return argv[++i];
    };
    if (a == "--model")
      path = next();
    else if (a == "--threads")
      threads = int_list(next());
    else if (a == "--spin-us")
      spins = int_list(next());
    else if (a == "--prompt")
      prompt = std::atoi(next().c_str());
    else if (a == "--tokens")
      tokens = std::atoi(next().c_str());
    else if (a == "--reps")
      reps = std::atoi(next().c_str());
    else if (a == "--kv-type")
      kv_type = next();
    else {
      std::fprintf(stderr,
                   "usage: %s --model PATH [--threads 1,2] [--spin-us 0,300] [--prompt N] [--tokens N] [--reps N] "
                   "[--kv-type auto|f32|f16|int8]\n",
                   argv[0]);
      return 2;
    }
  }
  if (path.empty() || prompt < 1 || tokens < 1 || reps < 1 || threads.empty() || spins.empty()) {
    std::fprintf(stderr, "pool_decode_bench: --model is required; --prompt, --tokens, --reps must be >= 1\n");
    return 2;
  }
  try {
    // The cell type as an engine reads it (the kv_type setting's parser; auto = engine::auto_cpu_kv_type).
    const config::Settings settings = config::load_settings_strict({{"STRATA_KV_TYPE", kv_type}});
    auto model = engine::load_cpu_model(path, "", settings.kv_type);
    std::printf("K/V cells: %s\n", model::kv_type_name(model->hparams().kv_type));
    // Repacked weights as an engine has them (STRATA_REPACK, default auto: docs/quantization.md).
    const model::RepackReport repacked = model::repack_weights(*model, cpu::repack_mode(), true, nullptr);
    std::printf("%s\n", repacked.summary().c_str());
    const auto& hp = model->hparams();
    std::vector<Config> configs;
    for (int t : threads)
      for (int sp : spins) {
        Config c;
        c.threads = t;
        c.spin_us = sp;
        c.pool = std::make_unique<ThreadPool>(t, sp);
        engine::WindowConfig wc;
        wc.max_ctx = prompt + tokens + 8;
        wc.max_rows = std::min(prompt, 512);
        wc.pool = c.pool.get();
        c.window = std::make_unique<engine::Window>(*model, wc);
        configs.push_back(std::move(c));
      }
    // At least 17 tokens: the warm-up below reads token 16 even for a shorter prompt.
    std::vector<int32_t> toks(static_cast<std::size_t>(std::max(prompt + tokens, 17)));
    for (std::size_t i = 0; i < toks.size(); ++i)
      toks[i] = static_cast<int32_t>((i * 7919 + 13) % std::min<uint32_t>(hp.n_vocab, 257));
    for (auto& c : configs) {  // warm-up: page the weights in, first-touch the scratch
      c.window->run(toks.data(), std::min(prompt, 16), 0, engine::LogitRows::Last);
      c.window->run(toks.data() + 16, 1, std::min(prompt, 16), engine::LogitRows::Last);
    }
    for (int rep = 0; rep < reps; ++rep)
      for (auto& c : configs) {
        auto t0 = Clock::now();
        for (int s = 0; s < prompt; s += c.window->max_rows()) {  // the prompt in chunks of max_rows
          const int rows = std::min(c.window->max_rows(), prompt - s);
          c.window->run(toks.data() + s, rows, s,
                        s + rows == prompt ? engine::LogitRows::Last : engine::LogitRows::None);
        }
        c.prefill_tok_s.push_back(prompt / std::chrono::duration<double>(Clock::now() - t0).count());
        const uint64_t d0 = c.pool->dispatches(), s0 = c.pool->sleeps();
        const Usage u0 = usage_now();
        t0 = Clock::now();
        for (int k = 0; k < tokens; ++k)
          c.window->run(toks.data() + prompt + k, 1, prompt + k, engine::LogitRows::Last);
        const double wall = std::chrono::duration<double>(Clock::now() - t0).count();
        const Usage u1 = usage_now();
        c.decode_tok_s.push_back(tokens / wall);
        c.dispatches.push_back(static_cast<double>(c.pool->dispatches() - d0) / tokens);
        c.sleeps.push_back(static_cast<double>(c.pool->sleeps() - s0) / tokens);
        c.switches.push_back(static_cast<double>(u1.switches - u0.switches) / tokens);
        c.busy.push_back((u1.cpu_s - u0.cpu_s) / wall);
      }
    std::printf("model %s; ISA path %s; prompt %d, %d decode tokens, median of %d interleaved reps\n", path.c_str(),
                cpu::active_path_name(), prompt, tokens, reps);
    std::printf("%7s %7s %12s %11s %14s %12s %16s %10s\n", "threads", "spin_us", "prefill t/s", "decode t/s",
                "dispatch/tok", "sleeps/tok", "ctx switch/tok", "busy CPUs");
    for (auto& c : configs)
      std::printf("%7d %7d %12.1f %11.2f %14.1f %12.1f %16.1f %10.2f\n", c.threads, c.spin_us, median(c.prefill_tok_s),
                  median(c.decode_tok_s), median(c.dispatches), median(c.sleeps), median(c.switches), median(c.busy));
  } catch (const std::exception& e) {
    std::fprintf(stderr, "error: %s\n", e.what());
    return 1;
  }
  return 0;
}
