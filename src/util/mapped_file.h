// A file mapped read-only into memory. Processes that map the same file share its pages in the
// page cache: one copy in memory, whatever the number of processes.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>

namespace nmt {

class MappedFile {
 public:
  MappedFile() = default;
  // Maps the whole file; throws an Error naming it when it cannot be opened or mapped.
  explicit MappedFile(const std::string& path);
  ~MappedFile();
  MappedFile(MappedFile&& other) noexcept;
  MappedFile& operator=(MappedFile&& other) noexcept;
  MappedFile(const MappedFile&) = delete;
  MappedFile& operator=(const MappedFile&) = delete;

  const uint8_t* data() const { return data_; }
  size_t size() const { return size_; }
  // Drops this process's page-table entries for the whole mapping (the pages stay in the page
  // cache and come back on the next read): after one pass over it, the resident set shrinks.
  void forget_pages() const;

 private:
  const uint8_t* data_ = nullptr;
  size_t size_ = 0;
};

}  // namespace nmt
