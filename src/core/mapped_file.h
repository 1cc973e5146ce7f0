// MappedFile: a whole file mapped read-only into memory; the bytes stay valid
// for the lifetime of the object (move-only).
#pragma once

#include <cstddef>
#include <cstdint>
#include <span>
#include <string>

namespace folio {

class MappedFile {
 public:
  // Throws Error naming the path and the system's reason when it cannot open.
  explicit MappedFile(const std::string& path);
  ~MappedFile();
  MappedFile(MappedFile&& other) noexcept;
  MappedFile& operator=(MappedFile&& other) noexcept;
  MappedFile(const MappedFile&) = delete;
  MappedFile& operator=(const MappedFile&) = delete;

  const std::uint8_t* data() const { return data_; }
  std::size_t size() const { return size_; }
  std::span<const std::uint8_t> bytes() const { return {data_, size_}; }
  const std::string& path() const { return path_; }

  // Lets the system drop the resident pages wholly inside [p, p + bytes) of
  // the mapping (a copy of them is in use instead); they are read from the
  // file again if touched. Bytes outside the mapping are left alone.
  void drop_pages(const void* p, std::size_t bytes) const;

 private:
  void release();

  std::string path_;
  const std::uint8_t* data_ = nullptr;
  std::size_t size_ = 0;
};

}  // namespace folio
