// The native side of the per-call profile (bench/README.md "Per-call cost"): a pool round trip
// with no work, one std::thread spawned and joined (what every parallel call paid before the
// pool), and each kernel's compute alone on preallocated buffers (no Node, no allocation), median
// µs of many calls. Build and run from the repository root:
//   g++ -O3 -std=c++17 -pthread -o /tmp/pool-cost bench/pool-cost.cc native/cpu/{ppo_loss,advantage,gather_logprobs}.cc
//   MEMPO_THREADS=1 /tmp/pool-cost; MEMPO_THREADS=2 /tmp/pool-cost
#include "../native/cpu/parallel.h"
#include "../native/kernels.h"
#include <chrono>
#include <cstdio>
#include <vector>
#include <algorithm>
#include <random>
using namespace std::chrono;
template <class F> double med_us(F f, int n) {
  std::vector<double> t;
  for (int i = 0; i < n; ++i) { auto a = steady_clock::now(); f(); t.push_back(duration<double, std::micro>(steady_clock::now() - a).count()); }
  std::sort(t.begin(), t.end()); return t[t.size() / 2];
}
int main() {
  volatile int64_t sink = 0;
  printf("threads %d\n", mempo::configured_threads());
  printf("pool round trip, empty work: %.2f us\n", med_us([&] { mempo::parallel_for(2, 1, [&](int64_t b, int64_t e, int) { sink += e - b; }); }, 20000));
  printf("spawn+join one std::thread: %.2f us\n", med_us([&] { std::thread t([&] { sink += 1; }); t.join(); }, 2000));
  // ppo compute only
  for (int64_t n : {int64_t(1024), int64_t(1) << 16, int64_t(1) << 19, int64_t(1) << 20}) {
    int64_t cols = n >= 1024 ? 1024 : n, rows = n / cols;
    if (n == 1024) { rows = 16; cols = 64; }
    std::mt19937 g(1); std::uniform_real_distribution<float> u(0, 1);
    std::vector<float> lp(n), olp(n), adv(n), grad(n); std::vector<uint8_t> m(n);
    for (int64_t i = 0; i < n; ++i) { lp[i] = -4 * u(g); olp[i] = lp[i] + (u(g) - 0.5f) * 0.4f; adv[i] = u(g) - 0.5f; m[i] = u(g) < 0.9f; }
    double us = med_us([&] { mempo::cpu::ppo_policy_loss(lp.data(), olp.data(), adv.data(), m.data(), rows, cols, 0.2, 0.2, 3, mempo::kAggTokenMean, nullptr, 0, mempo::kKlNone, 0, grad.data()); }, n > 100000 ? 200 : 5000);
    printf("ppo compute %ldx%ld: %.1f us (%.2f ns/token)\n", rows, cols, us, us * 1e3 / n);
    std::vector<double> sc(rows); std::vector<int32_t> gr(rows); for (int64_t r = 0; r < rows; ++r) { sc[r] = u(g) < 0.5; gr[r] = r / 16; }
    double us2 = med_us([&] { mempo::cpu::outcome_advantage(sc.data(), gr.data(), rows, int32_t((rows + 15) / 16), 1e-6, true, m.data(), cols, grad.data()); }, n > 100000 ? 200 : 5000);
    printf("outcome compute %ldx%ld: %.1f us\n", rows, cols, us2);
  }
  // the fused advantage stage, shaped as bench/peer.mjs: groups of 16, 3 spans per row (3-9 % of a third)
  for (int64_t rows : {int64_t(16), int64_t(512)}) {
    const int64_t cols = rows == 16 ? 64 : 1024, n = rows * cols, m = rows * 3, third = cols / 3;
    std::mt19937 g(3); std::uniform_real_distribution<double> u(0, 1);
    std::vector<double> sc(rows), rw(m); std::vector<int32_t> gr(rows), mg(m), sp(3 * m); std::vector<uint8_t> mk(n);
    for (int64_t r = 0; r < rows; ++r) { sc[r] = u(g) < 0.5; gr[r] = int32_t(r / 16); }
    for (int64_t i = 0; i < n; ++i) mk[i] = u(g) < 0.8;
    for (int64_t k = 0; k < m; ++k) {
      const int64_t start = (k % 3) * third + int64_t(u(g) * third * 0.15);
      sp[3 * k] = int32_t(k / 3); sp[3 * k + 1] = int32_t(start); sp[3 * k + 2] = int32_t(start + std::max<int64_t>(1, int64_t(third * (0.03 + u(g) * 0.06))));
      rw[k] = u(g) - 0.5; mg[k] = int32_t(k / 48);
    }
    std::vector<float> oo(n), om(n), of(n);
    const mempo::AdvantageBatch in{sc.data(), gr.data(), int32_t((rows + 15) / 16), mk.data(), rows, cols, rw.data(), mg.data(), int32_t((m + 47) / 48), sp.data(), m, 1e-6, true, 0.5};
    printf("stage compute %ldx%ld: %.1f us\n", rows, cols, med_us([&] { mempo::cpu::mempo_advantages(in, mempo::AdvantageResults{oo.data(), om.data(), of.data(), false}); }, rows > 100 ? 400 : 5000));
  }
  for (int64_t R : {16, 256}) {
    int64_t V = 3072; std::vector<float> x(R * V); std::vector<int32_t> t(R, 5); std::vector<float> o(R);
    std::mt19937 g(2); std::uniform_real_distribution<float> u(-20, 20); for (auto& v : x) v = u(g);
    printf("gather R=%ld V=3072: %.1f us\n", R, med_us([&] { mempo::cpu::gather_log_probs(x.data(), t.data(), R, V, o.data()); }, 2000));
  }
}
