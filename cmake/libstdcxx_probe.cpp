// Configure-time probe (cmake/nmt_torch.cmake): linked like nmt, does this executable see
// libstdc++'s own std::cout? Exits 1 when another library loaded before libstdc++ supplies the
// symbol (some CUDA LibTorch installations do), 0 otherwise.
#include <dlfcn.h>

#include <cstddef>
#include <iostream>

// From libtorch_cpu; declared here so that the probe needs no LibTorch headers.
namespace torch::cuda {
std::size_t device_count();
}

int main() {
  // A call into LibTorch: its libraries load as they do for nmt.
  volatile std::size_t devices = torch::cuda::device_count();
  (void)devices;
  void* lib = ::dlopen("libstdc++.so.6", RTLD_NOW | RTLD_NOLOAD);
  const void* own = lib != nullptr ? ::dlsym(lib, "_ZSt4cout") : nullptr;
  return own != nullptr && own != static_cast<const void*>(&std::cout) ? 1 : 0;
}
