#include "onnx/external_data.h"

#include <fcntl.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <charconv>
#include <cstdlib>
#include <cstring>
#include <memory>
#include <new>


namespace kiln::importer {

Result<std::shared_ptr<MappedFile>> MappedFile::open(const std::string& path) {
  const int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0) {
    const int err = errno;
    if (err == ENOENT) return not_found("'", path, "' does not exist");
    return make_status(StatusCode::kIo, "cannot open '", path, "': ", std::strerror(err));
  }
  struct stat st {};
  if (::fstat(fd, &st) != 0 || !S_ISREG(st.st_mode)) {
    ::close(fd);
    return make_status(StatusCode::kIo, "'", path, "' is not a regular file");
  }
  const auto size = static_cast<size_t>(st.st_size);
  void* addr = nullptr;
  if (size > 0) {
    addr = ::mmap(nullptr, size, PROT_READ, MAP_PRIVATE, fd, 0);
    if (addr == MAP_FAILED) {
      const int err = errno;
      ::close(fd);
      return make_status(StatusCode::kIo, "cannot map '", path, "': ", std::strerror(err));
    }
  }
  ::close(fd);  // the mapping stays valid without the descriptor
  return std::shared_ptr<MappedFile>(new MappedFile(addr, size));
}

MappedFile::~MappedFile() {
  if (addr_) ::munmap(addr_, size_);
}

namespace {

Result<uint64_t> parse_size(const std::string& text, const char* key, const std::string& what) {
  uint64_t v = 0;
  const char* end = text.data() + text.size();
  auto [p, ec] = std::from_chars(text.data(), end, v);
  if (ec != std::errc() || p != end || text.empty())
    return invalid_argument(what, " has external_data ", key, " '", text, "', which is not a non-negative integer");
  return v;
}

// A location must stay inside the model's folder: no absolute path, no "..".
bool location_is_safe(const std::string& loc) {
  if (loc.empty() || loc[0] == '/') return false;
  size_t start = 0;
  while (start <= loc.size()) {
    size_t end = loc.find_first_of("/\\", start);
    if (end == std::string::npos) end = loc.size();
    if (loc.compare(start, end - start, "..") == 0) return false;
    start = end + 1;
  }
  return true;
}

// realpath(3) of `path` ("" when it cannot be resolved: missing, unreadable).
std::string resolved(const std::string& path) {
  std::unique_ptr<char, decltype(&std::free)> r(::realpath(path.c_str(), nullptr), &std::free);
  return r ? std::string(r.get()) : std::string();
}

}  // namespace

Result<Tensor> ExternalData::load(const onnx::TensorProto& proto, DType dtype, const Shape& shape, size_t nbytes) {
  const std::string what = proto.name().empty() ? std::string("tensor") : "tensor '" + proto.name() + "'";
  std::string location;
  uint64_t offset = 0;
  bool has_length = false;
  uint64_t length = 0;
  for (const auto& kv : proto.external_data()) {
    if (kv.key() == "location") {
      location = kv.value();
    } else if (kv.key() == "offset") {
      KILN_ASSIGN_OR_RETURN(offset, parse_size(kv.value(), "offset", what));
    } else if (kv.key() == "length") {
      KILN_ASSIGN_OR_RETURN(length, parse_size(kv.value(), "length", what));
      has_length = true;
    }
    // "checksum" and keys of other tools are not needed to read the data.
  }
  if (location.empty())
    return invalid_argument(what, " is stored as external data but has no 'location' entry");
  if (!location_is_safe(location))
    return invalid_argument(what, " has external data location '", location,
                            "'; it must be a relative path inside the model's folder");
  if (has_length && length != nbytes)
    return invalid_argument(what, " has external data length ", length, ", but its dims ", shape.to_string(),
                            " of ", dtype_name(dtype), " need ", nbytes, " bytes");

  std::string path = base_dir_.empty() ? location : base_dir_ + "/" + location;
  // Symlinks must not lead out of the folder either: resolve, check, and map
  // the resolved file (not the name, which could be swapped afterwards).
  if (std::string real = resolved(path); !real.empty()) {
    const std::string dir = resolved(base_dir_.empty() ? "." : base_dir_);
    if (dir.empty() || real.compare(0, dir.size() + 1, dir + "/") != 0)
      return invalid_argument(what, " has external data location '", location,
                              "', which leaves the model's folder through a symlink (it resolves to '", real, "')");
    path = real;
  }
  auto it = files_.find(path);
  if (it == files_.end()) {
    auto file = MappedFile::open(path);
    if (!file.ok())
      return make_status(file.status().code(), "external data file of ", what, ": ", file.status().message());
    it = files_.emplace(path, std::move(*file)).first;
  }
  const std::shared_ptr<MappedFile>& file = it->second;
  if (offset > file->size() || nbytes > file->size() - offset)
    return make_status(StatusCode::kOutOfRange, "external data file '", path, "' is too short for ", what, ": it has ",
                       file->size(), " bytes, but the tensor needs bytes ", offset, " to ", offset + nbytes);

  const uint8_t* src = file->data() + offset;
  // Remembered for value_constant_info (a plugin may map the file itself).
  auto remember = [&](Tensor t, bool mapped) {
    if (t.raw_data()) locations_[t.raw_data()] = ir::ExternalLocation{path, offset, nbytes, t.raw_data(), mapped};
    return t;
  };
  if (nbytes > 0 && dtype != DType::kBool && reinterpret_cast<uintptr_t>(src) % kTensorAlignment == 0) {
    ++num_mapped_;
    // Read-only memory: Tensor has no const view, so the cast is the price of
    // not copying. Kiln never writes into initializers.
    return remember(Tensor::wrap(dtype, shape, const_cast<uint8_t*>(src), std::shared_ptr<void>(file)), true);
  }
  try {
    Tensor t = Tensor::allocate(dtype, shape);
    if (nbytes) std::memcpy(t.raw_data(), src, nbytes);
    if (dtype == DType::kBool) {
      auto* b = static_cast<uint8_t*>(t.raw_data());
      for (size_t i = 0; i < nbytes; ++i) b[i] = b[i] != 0;
      return t;  // not the file's bytes any more
    }
    return remember(std::move(t), false);
  } catch (const std::bad_alloc&) {
    return make_status(StatusCode::kOutOfRange, what, ": out of memory allocating ", nbytes, " bytes");
  }
}

}  // namespace kiln::importer
