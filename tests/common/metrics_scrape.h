#ifndef FOLIO_TESTS_COMMON_METRICS_SCRAPE_H_
#define FOLIO_TESTS_COMMON_METRICS_SCRAPE_H_

// Test helpers for the Prometheus endpoints: a plain HTTP/1.0 GET over a
// socket (no client library), a parser for the text exposition format, and
// a free local port.

#include <arpa/inet.h>
#include <netinet/in.h>
#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <chrono>
#include <cstdlib>
#include <map>
#include <optional>
#include <sstream>
#include <string>
#include <vector>

namespace folio::testing {

// GET http://127.0.0.1:port/path; the body on 200, nullopt otherwise
// (connection refused, timeout, other status).
inline std::optional<std::string> HttpGet(int port, const std::string& path,
                                          int timeout_ms = 5000) {
  const int fd = ::socket(AF_INET, SOCK_STREAM, 0);
  if (fd < 0) return std::nullopt;
  sockaddr_in addr{};
  addr.sin_family = AF_INET;
  addr.sin_port = htons(static_cast<uint16_t>(port));
  addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  if (::connect(fd, reinterpret_cast<sockaddr*>(&addr), sizeof(addr)) != 0) {
    ::close(fd);
    return std::nullopt;
  }
  const std::string request = "GET " + path + " HTTP/1.0\r\nHost: 127.0.0.1\r\n\r\n";
  if (::send(fd, request.data(), request.size(), MSG_NOSIGNAL) !=
      static_cast<ssize_t>(request.size())) {
    ::close(fd);
    return std::nullopt;
  }
  std::string response;
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::milliseconds(timeout_ms);
  char buf[65536];
  while (true) {
    const auto left = std::chrono::duration_cast<std::chrono::milliseconds>(
                          deadline - std::chrono::steady_clock::now())
                          .count();
    if (left <= 0) break;
    pollfd p{fd, POLLIN, 0};
    if (::poll(&p, 1, static_cast<int>(left)) <= 0) break;
    const ssize_t n = ::recv(fd, buf, sizeof(buf), 0);
    if (n <= 0) break;  // HTTP/1.0: the server closes after the body
    response.append(buf, static_cast<size_t>(n));
  }
  ::close(fd);
  const size_t header_end = response.find("\r\n\r\n");
  if (header_end == std::string::npos || response.rfind("HTTP/1.", 0) != 0) return std::nullopt;
  const size_t space = response.find(' ');
  if (space == std::string::npos || response.compare(space + 1, 3, "200") != 0) return std::nullopt;
  return response.substr(header_end + 4);
}

// A port that was free a moment ago (bound to 127.0.0.1:0, then released).
inline int FreePort() {
  const int fd = ::socket(AF_INET, SOCK_STREAM, 0);
  sockaddr_in addr{};
  addr.sin_family = AF_INET;
  addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  addr.sin_port = 0;
  socklen_t len = sizeof(addr);
  int port = -1;
  if (::bind(fd, reinterpret_cast<sockaddr*>(&addr), sizeof(addr)) == 0 &&
      ::getsockname(fd, reinterpret_cast<sockaddr*>(&addr), &len) == 0) {
    port = ntohs(addr.sin_port);
  }
  ::close(fd);
  return port;
}

// One sample line: name{labels} value.
struct Sample {
  std::string name;
  std::map<std::string, std::string> labels;
  double value = 0.0;
};

// A parsed scrape: "# TYPE" declarations and samples.
struct Exposition {
  std::map<std::string, std::string> types;  // family name -> counter|gauge|histogram|...
  std::vector<Sample> samples;

  // Samples named `name` whose labels include every pair of `match`.
  std::vector<Sample> Find(const std::string& name,
                           const std::map<std::string, std::string>& match = {}) const {
    std::vector<Sample> out;
    for (const Sample& s : samples) {
      if (s.name != name) continue;
      bool ok = true;
      for (const auto& [k, v] : match) {
        auto it = s.labels.find(k);
        if (it == s.labels.end() || it->second != v) ok = false;
      }
      if (ok) out.push_back(s);
    }
    return out;
  }
  // The value of the only sample matching, or nullopt when none or several.
  std::optional<double> Value(const std::string& name,
                              const std::map<std::string, std::string>& match = {}) const {
    const std::vector<Sample> found = Find(name, match);
    if (found.size() != 1) return std::nullopt;
    return found[0].value;
  }
};

inline Exposition ParseExposition(const std::string& text) {
  Exposition e;
  std::istringstream in(text);
  std::string line;
  while (std::getline(in, line)) {
    if (line.empty()) continue;
    if (line[0] == '#') {
      std::istringstream words(line);
      std::string hash, kind, name, type;
      words >> hash >> kind >> name >> type;
      if (kind == "TYPE") e.types[name] = type;
      continue;
    }
    Sample s;
    size_t pos = line.find_first_of("{ ");
    if (pos == std::string::npos) continue;
    s.name = line.substr(0, pos);
    if (line[pos] == '{') {
      ++pos;
      while (pos < line.size() && line[pos] != '}') {
        const size_t eq = line.find('=', pos);
        if (eq == std::string::npos || eq + 1 >= line.size() || line[eq + 1] != '"') break;
        const std::string key = line.substr(pos, eq - pos);
        std::string value;
        size_t i = eq + 2;
        for (; i < line.size() && line[i] != '"'; ++i) {
          if (line[i] == '\\' && i + 1 < line.size()) ++i;
          value += line[i];
        }
        s.labels[key] = value;
        pos = i + 1;
        if (pos < line.size() && line[pos] == ',') ++pos;
      }
      pos = line.find(' ', pos);
      if (pos == std::string::npos) continue;
    }
    s.value = std::strtod(line.c_str() + pos + 1, nullptr);
    e.samples.push_back(std::move(s));
  }
  return e;
}

// Scrapes http://127.0.0.1:port/metrics; an empty exposition on failure.
inline Exposition Scrape(int port) {
  std::optional<std::string> body = HttpGet(port, "/metrics");
  return body.has_value() ? ParseExposition(*body) : Exposition{};
}

}  // namespace folio::testing

#endif  // FOLIO_TESTS_COMMON_METRICS_SCRAPE_H_
