// A minimal fork-join over index ranges. Kernels here are memory-bound and run for
// milliseconds, so a fresh std::thread per worker costs little and keeps the addon free of
// global state; small inputs stay on the calling thread.
#pragma once
#include <algorithm>
#include <cstdint>
#include <cstdlib>
#include <thread>
#include <vector>

namespace mempo {

inline int configured_threads() {
  static const int n = [] {
    if (const char* env = std::getenv("MEMPO_THREADS")) {
      int v = std::atoi(env);
      if (v >= 1 && v <= 256) return v;
    }
    unsigned hc = std::thread::hardware_concurrency();
    return hc == 0 ? 1 : static_cast<int>(std::min(hc, 64u));
  }();
  return n;
}

// Calls fn(begin, end, worker) over [0, n) split into contiguous chunks; each chunk gets at
// least `grain` items. Returns the number of workers used.
template <typename Fn>
int parallel_for(int64_t n, int64_t grain, Fn&& fn) {
  int workers = static_cast<int>(std::max<int64_t>(1, std::min<int64_t>(configured_threads(), n / std::max<int64_t>(grain, 1))));
  if (workers <= 1) {
    fn(int64_t{0}, n, 0);
    return 1;
  }
  std::vector<std::thread> pool;
  pool.reserve(workers - 1);
  const int64_t chunk = (n + workers - 1) / workers;
  for (int w = 1; w < workers; ++w) {
    const int64_t b = std::min<int64_t>(n, w * chunk), e = std::min<int64_t>(n, b + chunk);
    pool.emplace_back([&fn, b, e, w] { fn(b, e, w); });
  }
  fn(int64_t{0}, std::min<int64_t>(n, chunk), 0);
  for (auto& t : pool) t.join();
  return workers;
}

}  // namespace mempo
