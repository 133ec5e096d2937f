// How translate and forced decoding batch their rows: length-sorted rows within a token budget,
// and batches run side by side on CPU threads.
#pragma once

#include <algorithm>
#include <cstdint>
#include <exception>
#include <mutex>
#include <utility>
#include <vector>

namespace nmt {

// [start, end) ranges of rows sorted by width (ascending, so a batch's last row sets its width)
// whose padded cells, rows x width, stay within the budget (a row wider than it goes alone).
inline std::vector<std::pair<size_t, size_t>> plan_batches(const std::vector<int64_t>& widths,
                                                           int64_t budget) {
  std::vector<std::pair<size_t, size_t>> batches;
  for (size_t start = 0; start < widths.size();) {
    size_t end = start + 1;
    while (end < widths.size() && static_cast<int64_t>(end - start + 1) * widths[end] <= budget)
      ++end;
    batches.emplace_back(start, end);
    start = end;
  }
  return batches;
}

// Runs job(i) for every i < n, on up to `workers` OpenMP threads side by side, the last (longest)
// jobs first. Inside the parallel region LibTorch's loops and OpenBLAS run on the calling thread,
// so a job's ops need no synchronisation between threads. The first exception is rethrown.
// Without OpenMP (CUDA builds) the jobs run one after another.
template <typename Job>
void run_side_by_side(size_t n, int64_t workers, const Job& job) {
  const auto count = static_cast<int64_t>(n);
  if (workers <= 1 || count <= 1) {
    for (int64_t i = 0; i < count; ++i) job(static_cast<size_t>(i));
    return;
  }
  [[maybe_unused]] const auto threads = static_cast<int>(std::min(workers, count));  // OpenMP only
  std::exception_ptr error;
  std::mutex mutex;
#pragma omp parallel for schedule(dynamic, 1) num_threads(threads)
  for (int64_t i = 0; i < count; ++i) {
    try {
      job(static_cast<size_t>(count - 1 - i));
    } catch (...) {
      const std::lock_guard<std::mutex> lock(mutex);
      if (!error) error = std::current_exception();
    }
  }
  if (error) std::rethrow_exception(error);
}

}  // namespace nmt
