#include "common/safetensors.h"

#include <fcntl.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <bit>
#include <cerrno>
#include <cstring>
#include <utility>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "common/json_text.h"
#include "nlohmann/json.hpp"

namespace folio {

static_assert(std::endian::native == std::endian::little,
              "safetensors data is little-endian; a big-endian host needs byte swaps");

namespace {

using json = nlohmann::json;

// The reference implementation's cap on the header size.
constexpr uint64_t kMaxHeaderBytes = 100u << 20;

absl::Status ErrnoStatus(int err, const std::string& what) {
  std::string msg = absl::StrCat(what, ": ", std::strerror(err));
  switch (err) {
    case ENOENT:
    case ENOTDIR:
      return absl::NotFoundError(msg);
    case EACCES:
    case EPERM:
      return absl::PermissionDeniedError(msg);
    default:
      return absl::UnavailableError(msg);
  }
}

bool ParseDTypeName(const std::string& s, DType* out) {
  if (s == "F32") {
    *out = DType::kF32;
  } else if (s == "F16") {
    *out = DType::kF16;
  } else if (s == "BF16") {
    *out = DType::kBF16;
  } else {
    return false;
  }
  return true;
}

std::string ShapeString(const std::vector<int64_t>& shape) {
  return absl::StrCat("[", absl::StrJoin(shape, ", "), "]");
}

}  // namespace

int64_t TensorInfo::NumElements() const {
  int64_t n = 1;
  for (int64_t d : shape) n *= d;
  return n;
}

SafetensorsFile::SafetensorsFile(std::string path, const uint8_t* map, size_t map_size)
    : path_(std::move(path)), map_(map), map_size_(map_size) {}

SafetensorsFile::~SafetensorsFile() {
  if (map_ != nullptr) munmap(const_cast<uint8_t*>(map_), map_size_);
}

absl::StatusOr<std::unique_ptr<SafetensorsFile>> SafetensorsFile::Open(const std::string& path) {
  int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0) return ErrnoStatus(errno, absl::StrCat("cannot open ", path));
  struct stat st;
  if (fstat(fd, &st) != 0) {
    int err = errno;
    ::close(fd);
    return ErrnoStatus(err, absl::StrCat("cannot stat ", path));
  }
  if (!S_ISREG(st.st_mode)) {
    ::close(fd);
    return absl::InvalidArgumentError(absl::StrCat(path, ": not a regular file"));
  }
  size_t size = static_cast<size_t>(st.st_size);
  if (size < 8) {
    ::close(fd);
    return absl::DataLossError(absl::StrCat(
        path, ": corrupt safetensors file: ", size, " bytes, shorter than the 8-byte header length"));
  }
  void* map = mmap(nullptr, size, PROT_READ, MAP_PRIVATE, fd, 0);
  int err = errno;
  ::close(fd);  // the mapping keeps the file alive
  if (map == MAP_FAILED) return ErrnoStatus(err, absl::StrCat("cannot mmap ", path));
  std::unique_ptr<SafetensorsFile> file(
      new SafetensorsFile(path, static_cast<const uint8_t*>(map), size));
  if (absl::Status s = file->ParseHeader(); !s.ok()) return s;
  return file;
}

absl::Status SafetensorsFile::ParseHeader() {
  auto corrupt = [&](std::string_view why) {
    return absl::DataLossError(
        absl::StrCat(path_, ": corrupt safetensors header: ", std::string(why)));
  };
  uint64_t header_len;
  std::memcpy(&header_len, map_, sizeof(header_len));
  if (header_len > map_size_ - 8) {
    return corrupt(absl::StrCat("header length ", header_len, " exceeds the ", map_size_ - 8,
                                " bytes after the length field"));
  }
  if (header_len > kMaxHeaderBytes) {
    return corrupt(absl::StrCat("header length ", header_len, " exceeds the limit of ",
                                kMaxHeaderBytes));
  }
  const char* text = reinterpret_cast<const char*>(map_ + 8);
  const uint8_t* data = map_ + 8 + header_len;
  const uint64_t data_size = map_size_ - 8 - header_len;

  json header;
  try {
    header = json::parse(text, text + header_len);
  } catch (const json::exception& e) {
    return corrupt(absl::StrCat("invalid JSON: ", e.what()));
  }
  if (!header.is_object()) return corrupt("not a JSON object");

  struct Extent {
    uint64_t begin, end;
    const std::string* name;
  };
  std::vector<Extent> extents;
  for (auto it = header.begin(); it != header.end(); ++it) {
    const std::string& name = it.key();
    if (name == "__metadata__") continue;
    const json& entry = it.value();
    auto bad = [&](std::string_view why) {
      return corrupt(absl::StrCat("tensor ", name, ": ", std::string(why)));
    };
    if (!entry.is_object()) {
      return bad(absl::StrCat("expected an object, got ", JsonSnippet(entry)));
    }
    auto dtype_it = entry.find("dtype");
    auto shape_it = entry.find("shape");
    auto offsets_it = entry.find("data_offsets");
    if (dtype_it == entry.end() || !dtype_it->is_string()) return bad("missing or non-string dtype");
    if (shape_it == entry.end() || !shape_it->is_array()) return bad("missing or non-list shape");
    if (offsets_it == entry.end() || !offsets_it->is_array() || offsets_it->size() != 2 ||
        !(*offsets_it)[0].is_number_unsigned() || !(*offsets_it)[1].is_number_unsigned()) {
      return bad("data_offsets must be two non-negative integers");
    }

    TensorInfo info;
    info.name = name;
    const std::string dtype_name = dtype_it->get<std::string>();
    if (!ParseDTypeName(dtype_name, &info.dtype)) {
      return absl::InvalidArgumentError(
          absl::StrCat(path_, ": tensor ", name, " has unsupported dtype '", dtype_name,
                       "' (supported: F32, F16, BF16)"));
    }
    uint64_t elems = 1;
    for (const json& d : *shape_it) {
      if (!d.is_number_unsigned() || d.get<uint64_t>() > uint64_t{INT64_MAX}) {
        return bad(absl::StrCat("shape entries must be non-negative integers, got ",
                                JsonSnippet(*shape_it)));
      }
      uint64_t dim = d.get<uint64_t>();
      if (__builtin_mul_overflow(elems, dim, &elems)) return bad("shape overflows");
      info.shape.push_back(static_cast<int64_t>(dim));
    }
    uint64_t begin = (*offsets_it)[0].get<uint64_t>();
    uint64_t end = (*offsets_it)[1].get<uint64_t>();
    if (begin > end || end > data_size) {
      return bad(absl::StrCat("data_offsets [", begin, ", ", end, ") outside the ", data_size,
                              " data bytes"));
    }
    uint64_t expected;
    if (__builtin_mul_overflow(elems, uint64_t{DTypeSize(info.dtype)}, &expected) ||
        expected != end - begin) {
      return bad(absl::StrCat("shape ", ShapeString(info.shape), " of ", dtype_name, " needs ",
                              elems, " elements x ", DTypeSize(info.dtype), " bytes but ",
                              "data_offsets span ", end - begin, " bytes"));
    }
    info.data = data + begin;
    info.nbytes = static_cast<size_t>(end - begin);
    auto [slot, inserted] = tensors_.emplace(name, std::move(info));
    if (end > begin) extents.push_back({begin, end, &slot->first});
  }

  std::sort(extents.begin(), extents.end(),
            [](const Extent& a, const Extent& b) { return a.begin < b.begin; });
  for (size_t i = 1; i < extents.size(); ++i) {
    if (extents[i].begin < extents[i - 1].end) {
      return corrupt(absl::StrCat("tensors ", *extents[i - 1].name, " [",
                                  extents[i - 1].begin, ", ", extents[i - 1].end, ") and ",
                                  *extents[i].name, " [", extents[i].begin, ", ",
                                  extents[i].end, ") overlap"));
    }
  }
  return absl::OkStatus();
}

const TensorInfo* SafetensorsFile::Find(std::string_view name) const {
  auto it = tensors_.find(std::string(name));
  return it == tensors_.end() ? nullptr : &it->second;
}

std::vector<std::string> SafetensorsFile::TensorNames() const {
  std::vector<std::string> names;
  names.reserve(tensors_.size());
  for (const auto& [name, info] : tensors_) names.push_back(name);
  std::sort(names.begin(), names.end());
  return names;
}

}  // namespace folio
