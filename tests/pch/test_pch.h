// The headers nearly every GoogleTest file here includes, parsed once into a
// precompiled header that every test binary reuses (tests/CMakeLists.txt):
// parsing them is 40% of a test file's compile time. Only third-party and
// standard headers: a change to folio's own headers must not rebuild it.
#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdint>
#include <filesystem>
#include <fstream>
#include <functional>
#include <map>
#include <memory>
#include <random>
#include <string>
#include <thread>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/strings/str_cat.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "nlohmann/json.hpp"
