// Device probe, error text, the process-wide context (streams + cached scratch) and
// DeviceArray. The context is allocated once and deliberately never destroyed: freeing device
// memory from a static destructor can run after the CUDA runtime has been torn down at exit.
#include <cstdlib>
#include <cstring>
#include <new>
#include <string>

#include "common.cuh"

namespace mempo {
namespace cuda {

namespace {

struct Context {
  std::mutex mu;
  bool streams_ready = false;
  cudaStream_t streams[2] = {nullptr, nullptr};
  void* slots[kMaxSlots] = {};
  size_t caps[kMaxSlots] = {};
};

Context& context() {
  static Context* c = new Context();  // intentionally leaked, see above
  return *c;
}

std::string error_text(cudaError_t e) {
  return std::string(cudaGetErrorString(e)) + " (" + cudaGetErrorName(e) + ")";
}

void free_slots(Context& c) {
  for (int i = 0; i < kMaxSlots; ++i) {
    if (c.slots[i]) cudaFree(c.slots[i]);
    c.slots[i] = nullptr;
    c.caps[i] = 0;
  }
  cudaGetLastError();
}

}  // namespace

void check(cudaError_t e, const char* what) {
  if (e == cudaSuccess) return;
  cudaGetLastError();  // clear a non-sticky error so the next call is not blamed for it
  throw CudaError(std::string("CUDA error in ") + what + ": " + error_text(e));
}

std::mutex& device_mutex() { return context().mu; }

const DeviceStatus& probe() {
  static const DeviceStatus status = [] {
    DeviceStatus s;
    int count = 0;
    const cudaError_t e = cudaGetDeviceCount(&count);
    if (e != cudaSuccess) {
      cudaGetLastError();
      s.error = "cudaGetDeviceCount failed: " + error_text(e);
      return s;
    }
    if (count < 1) {
      s.error = "cudaGetDeviceCount reported no CUDA device";
      return s;
    }
    cudaDeviceProp prop;
    std::memset(&prop, 0, sizeof prop);
    const cudaError_t pe = cudaGetDeviceProperties(&prop, 0);
    if (pe != cudaSuccess) {
      cudaGetLastError();
      s.error = "cudaGetDeviceProperties(0) failed: " + error_text(pe);
      return s;
    }
    const cudaError_t se = cudaSetDevice(0);
    if (se != cudaSuccess) {
      cudaGetLastError();
      s.error = "cudaSetDevice(0) failed: " + error_text(se);
      return s;
    }
    // Touch the context now so a device that cannot run this build's code (no matching SASS
    // and a driver too old for the PTX) is reported here rather than at the first kernel.
    const cudaError_t fe = cudaFree(nullptr);
    if (fe != cudaSuccess) {
      cudaGetLastError();
      s.error = "CUDA context creation failed: " + error_text(fe);
      return s;
    }
    s.available = true;
    s.name = prop.name;
    s.sm_count = prop.multiProcessorCount;
    return s;
  }();
  return status;
}

Session::Session() : lock_(context().mu) {
  const DeviceStatus& st = probe();
  if (!st.available) throw CudaError("no usable CUDA device: " + st.error);
  check(cudaSetDevice(0), "cudaSetDevice");
  Context& c = context();
  if (!c.streams_ready) {
    check(cudaStreamCreateWithFlags(&c.streams[0], cudaStreamNonBlocking), "cudaStreamCreate");
    check(cudaStreamCreateWithFlags(&c.streams[1], cudaStreamNonBlocking), "cudaStreamCreate");
    c.streams_ready = true;
  }
}

Session::~Session() {
  Context& c = context();
  if (c.streams_ready) {
    cudaStreamSynchronize(c.streams[0]);
    cudaStreamSynchronize(c.streams[1]);
    cudaGetLastError();
  }
}

cudaStream_t Session::stream(int i) const { return context().streams[i & 1]; }
int Session::sm_count() const { return probe().sm_count; }
void* Session::slot_ptr(int i) const { return context().slots[i]; }

void Session::sync() {
  check(cudaStreamSynchronize(stream(0)), "cudaStreamSynchronize");
  check(cudaStreamSynchronize(stream(1)), "cudaStreamSynchronize");
}

void Session::reserve(std::initializer_list<size_t> bytes) {
  Context& c = context();
  if (bytes.size() > size_t(kMaxSlots)) throw CudaError("mempo cuda: too many scratch slots");
  for (int attempt = 0; attempt < 2; ++attempt) {
    cudaError_t failed = cudaSuccess;
    int i = 0;
    for (size_t want : bytes) {
      if (want == 0) want = 256;
      if (c.caps[i] < want) {
        // Slots may be in use by work queued on the streams from the previous call.
        check(cudaStreamSynchronize(c.streams[0]), "cudaStreamSynchronize");
        check(cudaStreamSynchronize(c.streams[1]), "cudaStreamSynchronize");
        if (c.slots[i]) cudaFree(c.slots[i]);
        c.slots[i] = nullptr;
        c.caps[i] = 0;
#ifdef MEMPO_CUDA_EMULATION
        const size_t rounded = want;  // exact, so a sanitizer sees any overrun of a slot
#else
        const size_t rounded = (want + (size_t(1) << 20) - 1) & ~((size_t(1) << 20) - 1);
#endif
        void* p = nullptr;
        failed = cudaMalloc(&p, rounded);
        if (failed != cudaSuccess) break;
        c.slots[i] = p;
        c.caps[i] = rounded;
      }
      ++i;
    }
    if (failed == cudaSuccess) return;
    if (failed != cudaErrorMemoryAllocation || attempt == 1) {
      free_slots(c);
      check(failed, "cudaMalloc (scratch)");
    }
    free_slots(c);  // out of memory: drop every cached slot and try the whole set once more
  }
}

void release_scratch_locked() { free_slots(context()); }

// ---- DeviceArray -------------------------------------------------------------------------

std::unique_ptr<DeviceArray> DeviceArray::upload(const float* host, int64_t n) {
  Session s;
  const size_t bytes = sizeof(float) * size_t(n > 0 ? n : 1);
  float* p = nullptr;
  cudaError_t e = cudaMalloc(&p, bytes);
  if (e == cudaErrorMemoryAllocation) {
    cudaGetLastError();
    s.sync();
    release_scratch_locked();  // the cached scratch may be what stands in the way
    e = cudaMalloc(&p, bytes);
  }
  check(e, "cudaMalloc (DeviceBuffer)");
  if (n > 0) {
    // On the session's stream, then wait: a pageable copy may return before its DMA is done,
    // and the kernels that read the buffer later run on non-blocking streams.
    cudaError_t ce = cudaMemcpyAsync(p, host, sizeof(float) * size_t(n), cudaMemcpyHostToDevice, s.stream(0));
    if (ce == cudaSuccess) ce = cudaStreamSynchronize(s.stream(0));
    if (ce != cudaSuccess) {
      cudaFree(p);
      check(ce, "cudaMemcpyAsync (DeviceBuffer upload)");
    }
  }
  return std::unique_ptr<DeviceArray>(new DeviceArray(p, n));
}

DeviceArray::~DeviceArray() {
  if (!ptr_) return;
  cudaFree(ptr_);  // synchronises with outstanding work; errors at teardown are ignored
  cudaGetLastError();
}

void DeviceArray::write(const float* host, int64_t n) {
  if (n != n_) throw CudaError("mempo cuda: DeviceBuffer write of a different length");
  Session s;
  if (n > 0) {
    check(cudaMemcpyAsync(ptr_, host, sizeof(float) * size_t(n), cudaMemcpyHostToDevice, s.stream(0)),
          "cudaMemcpyAsync (DeviceBuffer write)");
    s.sync();
  }
}

void DeviceArray::read(float* host) const {
  Session s;
  if (n_ > 0) {
    check(cudaMemcpyAsync(host, ptr_, sizeof(float) * size_t(n_), cudaMemcpyDeviceToHost, s.stream(0)),
          "cudaMemcpyAsync (DeviceBuffer read)");
    s.sync();
  }
}

}  // namespace cuda
}  // namespace mempo
