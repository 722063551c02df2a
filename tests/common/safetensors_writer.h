#ifndef FOLIO_TESTS_COMMON_SAFETENSORS_WRITER_H_
#define FOLIO_TESTS_COMMON_SAFETENSORS_WRITER_H_

// A tiny safetensors writer for tests: valid files from tensors, and raw
// files (any header text, any header length field, any data) for the
// corrupt-file cases. Also per-test temporary directories.

#include <unistd.h>

#include <cstdint>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <optional>
#include <string>
#include <vector>

#include "common/dtype.h"
#include "gtest/gtest.h"
#include "nlohmann/json.hpp"

namespace folio::testing {

struct TestTensor {
  std::string name;
  std::string dtype;  // "F32", "F16", "BF16" (or anything, for corrupt files)
  std::vector<int64_t> shape;
  std::string bytes;
};

inline std::string EncodeF32(const std::vector<float>& v) {
  std::string out(v.size() * 4, '\0');
  std::memcpy(out.data(), v.data(), out.size());
  return out;
}

inline std::string EncodeF16(const std::vector<float>& v) {
  std::string out(v.size() * 2, '\0');
  for (size_t i = 0; i < v.size(); ++i) {
    uint16_t h = FloatToFp16(v[i]);
    std::memcpy(out.data() + 2 * i, &h, 2);
  }
  return out;
}

inline std::string EncodeBf16(const std::vector<float>& v) {
  std::string out(v.size() * 2, '\0');
  for (size_t i = 0; i < v.size(); ++i) {
    uint16_t h = FloatToBf16(v[i]);
    std::memcpy(out.data() + 2 * i, &h, 2);
  }
  return out;
}

inline std::string Encode(DType dtype, const std::vector<float>& v) {
  switch (dtype) {
    case DType::kF32:
      return EncodeF32(v);
    case DType::kF16:
      return EncodeF16(v);
    case DType::kBF16:
      return EncodeBf16(v);
  }
  return {};
}

inline TestTensor MakeTensor(std::string name, DType dtype, std::vector<int64_t> shape,
                             const std::vector<float>& values) {
  return TestTensor{std::move(name), DTypeName(dtype), std::move(shape), Encode(dtype, values)};
}

// Writes the length field (header.size() unless overridden), the header text
// and the data bytes, exactly as given.
inline void WriteRaw(const std::string& path, const std::string& header, const std::string& data,
                     std::optional<uint64_t> header_len = std::nullopt) {
  std::ofstream out(path, std::ios::binary | std::ios::trunc);
  uint64_t len = header_len.value_or(header.size());
  out.write(reinterpret_cast<const char*>(&len), sizeof(len));
  out.write(header.data(), static_cast<std::streamsize>(header.size()));
  out.write(data.data(), static_cast<std::streamsize>(data.size()));
  ASSERT_TRUE(out.good()) << path;
}

// The header JSON of `tensors` laid out back to back, in order.
inline nlohmann::json HeaderFor(const std::vector<TestTensor>& tensors) {
  nlohmann::json header = nlohmann::json::object();
  header["__metadata__"] = {{"format", "pt"}};
  uint64_t offset = 0;
  for (const TestTensor& t : tensors) {
    header[t.name] = {{"dtype", t.dtype},
                      {"shape", t.shape},
                      {"data_offsets", {offset, offset + t.bytes.size()}}};
    offset += t.bytes.size();
  }
  return header;
}

// A valid file, like the Python writer's: header padded with spaces to a
// multiple of 8 bytes, data back to back.
inline void WriteSafetensors(const std::string& path, const std::vector<TestTensor>& tensors) {
  std::string header = HeaderFor(tensors).dump();
  header.append((8 - header.size() % 8) % 8, ' ');
  std::string data;
  for (const TestTensor& t : tensors) data += t.bytes;
  WriteRaw(path, header, data);
}

inline void WriteText(const std::string& path, const std::string& text) {
  std::ofstream out(path, std::ios::binary | std::ios::trunc);
  out << text;
  ASSERT_TRUE(out.good()) << path;
}

// Removes the directories MakeTestDir made when the test process exits (ctest
// runs one test per process), so that test runs leave nothing in /tmp.
inline void RemoveAtExit(const std::filesystem::path& dir) {
  static struct Cleanup {
    std::vector<std::filesystem::path> dirs;
    ~Cleanup() {
      std::error_code ignored;
      for (const auto& d : dirs) std::filesystem::remove_all(d, ignored);
    }
  } cleanup;
  cleanup.dirs.push_back(dir);
}

// An empty directory unique to the running test, removed at exit.
inline std::string MakeTestDir() {
  const ::testing::TestInfo* info = ::testing::UnitTest::GetInstance()->current_test_info();
  std::string name = std::string(info->test_suite_name()) + "_" + info->name();
  for (char& c : name) {
    if (c == '/') c = '_';
  }
  std::filesystem::path dir = std::filesystem::path(::testing::TempDir()) /
                              ("folio_common_" + std::to_string(::getpid()) + "_" + name);
  std::filesystem::remove_all(dir);
  std::filesystem::create_directories(dir);
  RemoveAtExit(dir);
  return dir.string();
}

}  // namespace folio::testing

#endif  // FOLIO_TESTS_COMMON_SAFETENSORS_WRITER_H_
