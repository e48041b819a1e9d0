// A fork-join over index ranges on one persistent pool of MEMPO_THREADS - 1 workers (the caller
// is worker 0). Trainers call these kernels per micro-batch, so a call must not pay for thread
// creation: the pool starts on the first parallel call, its workers spin briefly and then sleep
// on a condition variable between calls, and are joined by shutdown_pool() (the addon's env cleanup hook,
// native/binding.cc). Inputs below a kernel's grain run on the calling thread without touching
// the pool; a call made while another thread (a worker_thread's JS) holds the pool runs serially
// on its own thread instead of waiting.
#pragma once
#include <algorithm>
#include <atomic>
#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <cstdlib>
#include <exception>
#include <mutex>
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

// Spin briefly before sleeping: waking a sleeping thread costs ~50 µs on a VM (measured in
// bench/README.md "Per-call cost"), more than a small kernel, while back-to-back calls (a
// trainer's micro-batches) find the workers still spinning. Bounded, so an idle addon burns no CPU.
constexpr std::chrono::microseconds kSpin{100};

inline void cpu_relax() {
#if defined(__x86_64__) || defined(_M_X64)
  __builtin_ia32_pause();
#elif defined(__aarch64__)
  asm volatile("yield");
#endif
}

// Spins on ready() for up to kSpin; true when it became true.
template <typename Ready>
bool spin_until(Ready&& ready) {
  const auto until = std::chrono::steady_clock::now() + kSpin;
  for (int i = 0;; ++i) {
    if (ready()) return true;
    cpu_relax();
    if ((i & 63) == 63 && std::chrono::steady_clock::now() > until) return false;
  }
}

class WorkerPool {
 public:
  using Task = void (*)(void* ctx, int worker);

  // task(ctx, w) for w in [0, workers), w = 0 on the calling thread; returns once all are done.
  // false (nothing run) when another thread holds the pool: the caller then runs serially.
  bool run(int workers, Task task, void* ctx) {
    std::unique_lock<std::mutex> busy(busy_, std::try_to_lock);
    if (!busy.owns_lock()) return false;
    bool wake = false;
    {
      std::lock_guard<std::mutex> lock(mu_);
      if (threads_.empty()) start();
      task_ = task;
      ctx_ = ctx;
      workers_ = std::min<int>(workers, int(threads_.size()) + 1);
      error_ = nullptr;
      pending_.store(workers_ - 1, std::memory_order_relaxed);
      generation_.fetch_add(1, std::memory_order_release);
      wake = sleepers_ > 0;
    }
    if (wake) wake_.notify_all();
    std::exception_ptr error;
    try {
      task(ctx, 0);
    } catch (...) {
      error = std::current_exception();
    }
    const auto finished = [this] { return pending_.load(std::memory_order_acquire) == 0; };
    if (!spin_until(finished)) {
      std::unique_lock<std::mutex> lock(mu_);
      done_.wait(lock, finished);
    }
    if (!error) error = error_;
    if (error) std::rethrow_exception(error);
    return true;
  }

  // Joins the workers (a later run() starts them again).
  void shutdown() {
    std::lock_guard<std::mutex> busy(busy_);
    {
      std::lock_guard<std::mutex> lock(mu_);
      stop_.store(true);
    }
    wake_.notify_all();
    for (std::thread& t : threads_) t.join();
    threads_.clear();
    stop_.store(false);
  }

 private:
  void start() {  // under mu_
    const int n = configured_threads() - 1;
    threads_.reserve(size_t(n));
    const uint64_t now = generation_.load();  // before this job's bump: the new workers run it
    for (int w = 1; w <= n; ++w) threads_.emplace_back([this, w, now] { loop(w, now); });
  }

  void loop(int w, uint64_t seen) {
    for (;;) {
      const auto news = [&] { return stop_.load(std::memory_order_relaxed) || generation_.load(std::memory_order_acquire) != seen; };
      if (!spin_until(news)) {
        std::unique_lock<std::mutex> lock(mu_);
        ++sleepers_;
        wake_.wait(lock, news);
        --sleepers_;
      }
      if (stop_.load()) return;
      seen = generation_.load(std::memory_order_acquire);
      if (w >= workers_) continue;
      std::exception_ptr error;
      try {
        task_(ctx_, w);
      } catch (...) {
        error = std::current_exception();
      }
      if (error) {
        std::lock_guard<std::mutex> lock(mu_);
        if (!error_) error_ = error;
      }
      if (pending_.fetch_sub(1, std::memory_order_acq_rel) == 1) {
        std::lock_guard<std::mutex> lock(mu_);  // the caller may be about to sleep on done_
        done_.notify_one();
      }
    }
  }

  std::mutex busy_;  // one job at a time
  std::mutex mu_;
  std::condition_variable wake_, done_;
  std::vector<std::thread> threads_;
  // The job: written before generation_ is bumped (release), read after it is seen (acquire).
  Task task_ = nullptr;
  void* ctx_ = nullptr;
  int workers_ = 0;
  std::exception_ptr error_;
  std::atomic<uint64_t> generation_{0};
  std::atomic<int> pending_{0};
  std::atomic<bool> stop_{false};
  int sleepers_ = 0;  // under mu_
};

inline WorkerPool& worker_pool() {
  static WorkerPool* pool = new WorkerPool();  // never destroyed: its threads are joined by shutdown_pool()
  return *pool;
}

inline void shutdown_pool() { worker_pool().shutdown(); }

// Calls fn(begin, end, worker) over [0, n) split into contiguous chunks; each chunk gets at
// least `grain` items (a kernel's grain is the work below which a pool round trip, measured in
// bench/README.md "Per-call cost", costs more than it saves). Returns the number of workers used.
template <typename Fn>
int parallel_for(int64_t n, int64_t grain, Fn&& fn) {
  const int workers = static_cast<int>(std::max<int64_t>(1, std::min<int64_t>(configured_threads(), n / std::max<int64_t>(grain, 1))));
  const int64_t chunk = (n + workers - 1) / workers;
  if (workers > 1) {
    struct Job {
      Fn* fn;
      int64_t n, chunk;
    } job{&fn, n, chunk};
    const WorkerPool::Task task = [](void* ctx, int w) {
      const Job& j = *static_cast<const Job*>(ctx);
      const int64_t b = std::min<int64_t>(j.n, w * j.chunk), e = std::min<int64_t>(j.n, b + j.chunk);
      if (b < e) (*j.fn)(b, e, w);
    };
    if (worker_pool().run(workers, task, &job)) return workers;
  }
  // Serial: one chunk after another on this thread, so per-worker partials stay valid.
  for (int w = 0; w < workers; ++w) {
    const int64_t b = std::min<int64_t>(n, w * chunk), e = std::min<int64_t>(n, b + chunk);
    if (b < e || w == 0) fn(b, e, w);
  }
  return workers;
}

}  // namespace mempo
