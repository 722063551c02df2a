#include "worker/shm_communicator.h"

#include <fcntl.h>
#include <linux/futex.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cerrno>
#include <chrono>
#include <climits>
#include <cstring>
#include <exception>
#include <fstream>
#include <random>
#include <sstream>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "absl/strings/strip.h"
#include "gloo/rendezvous/store.h"

namespace folio {

// Lives at the start of the segment; rank 0 initializes it (the segment is
// zero-filled by ftruncate) and publishes `magic` last. Every shared word is
// accessed through std::atomic_ref (lock-free, address-free: valid across
// processes).
struct ShmCommunicator::Header {
  static constexpr uint64_t kMagic = 0x666f6c696f73686dULL;  // "foliosh m"
  static constexpr uint32_t kVersion = 1;

  uint64_t magic;
  uint32_t version;
  int32_t world_size;
  int64_t slot_bytes;
  int64_t data_offset;
  alignas(64) uint32_t arrived;     // ranks at the current barrier
  alignas(64) uint32_t generation;  // +1 per completed barrier; the futex word
  uint32_t sleepers;                // ranks in FUTEX_WAIT (or about to be)
  uint32_t broken;                  // 1: a rank timed out, exited or left
  struct alignas(64) RankInfo {
    uint32_t joined;     // 1 once pid/start_time/pid_ns are set
    uint32_t arrivals;   // barrier rounds this rank arrived at (diagnostics)
    int32_t pid;
    uint64_t start_time;  // /proc/<pid>/stat field 22: tells a reused pid
    uint64_t pid_ns;      // inode of /proc/<pid>/ns/pid
  } ranks[kMaxRanks];
};

namespace {

using SteadyClock = std::chrono::steady_clock;
static_assert(std::atomic_ref<uint32_t>::is_always_lock_free);

template <typename T>
std::atomic_ref<T> A(T& x) {
  return std::atomic_ref<T>(x);
}

inline void CpuRelax() {
#if defined(__x86_64__) || defined(__i386__)
  __builtin_ia32_pause();
#elif defined(__aarch64__)
  asm volatile("yield" ::: "memory");
#endif
}

// Shared (not FUTEX_PRIVATE): the word is in a MAP_SHARED mapping that other
// processes wait on too.
void FutexWait(uint32_t* word, uint32_t expected, absl::Duration timeout) {
  timespec ts = absl::ToTimespec(std::max(timeout, absl::ZeroDuration()));
  syscall(SYS_futex, word, FUTEX_WAIT, expected, &ts, nullptr, 0);
}

void FutexWake(uint32_t* word) {
  syscall(SYS_futex, word, FUTEX_WAKE, INT_MAX, nullptr, nullptr, 0);
}

// State (field 3) and start time (field 22) of /proc/<pid>/stat; false when
// the process is gone.
bool ReadProcStat(int32_t pid, char* state, uint64_t* start_time) {
  std::ifstream in(absl::StrCat("/proc/", pid, "/stat"));
  std::string line;
  if (!in || !std::getline(in, line)) return false;
  const size_t paren = line.rfind(')');
  if (paren == std::string::npos) return false;
  std::istringstream fields(line.substr(paren + 1));
  std::string f;
  for (int i = 3; i <= 22; ++i) {
    if (!(fields >> f)) return false;
    if (i == 3) *state = f.empty() ? '?' : f[0];
  }
  *start_time = std::strtoull(f.c_str(), nullptr, 10);
  return true;
}

bool ProcessAlive(int32_t pid, uint64_t start_time) {
  char state = '?';
  uint64_t start = 0;
  if (!ReadProcStat(pid, &state, &start)) return false;
  return state != 'Z' && state != 'X' && start == start_time;
}

uint64_t NamespaceInode(const char* path) {
  struct stat st {};
  return stat(path, &st) == 0 ? static_cast<uint64_t>(st.st_ino) : 0;
}

std::string ReadFirstLine(const char* path) {
  std::ifstream in(path);
  std::string line;
  if (in) std::getline(in, line);
  return std::string(absl::StripAsciiWhitespace(line));
}

std::string Link(const char* path) {
  char buf[256];
  const ssize_t n = readlink(path, buf, sizeof(buf) - 1);
  return n > 0 ? std::string(buf, static_cast<size_t>(n)) : std::string();
}

int64_t RoundUp(int64_t x, int64_t to) { return (x + to - 1) / to * to; }

constexpr char kSegmentKey[] = "shm/segment";
// Set by each rank once it has mapped the segment ("shm/mapped/<rank>").
constexpr char kMappedKeyPrefix[] = "shm/mapped/";

// A failed wait in the rendezvous store: past the deadline, `late` says who
// did not come; otherwise the store failed or the scheduler abandoned the
// group being formed (ABORTED from RendezvousService::Abandon).
absl::Status StoreWaitError(const char* late, absl::Duration timeout, absl::Time deadline,
                            const std::exception& e) {
  // The store's own clock may wake a little before ours.
  const absl::Duration slack = std::min(timeout / 10, absl::Milliseconds(100));
  if (absl::Now() >= deadline - slack) {
    return absl::DeadlineExceededError(absl::StrCat(
        "shm join: ", late, " within ", absl::FormatDuration(timeout), ": ", e.what()));
  }
  return absl::UnavailableError(absl::StrCat("shm join: rendezvous store: ", e.what()));
}

// Every rank says in the store that it has mapped the segment and waits for
// the others there, before the futex join: a rank that never comes is then a
// store wait, which ends as soon as the scheduler abandons the group being
// formed; the futex join alone could only time out (rank 0, which makes the
// segment, would wait the whole timeout for a peer that died meanwhile).
absl::Status MeetInStore(gloo::rendezvous::Store& store, int32_t rank, int32_t world,
                         absl::Duration timeout, absl::Time deadline) {
  try {
    store.set(absl::StrCat(kMappedKeyPrefix, rank), std::vector<char>{'1'});
    std::vector<std::string> keys;
    for (int32_t r = 0; r < world; ++r) keys.push_back(absl::StrCat(kMappedKeyPrefix, r));
    store.wait(keys, absl::ToChronoMilliseconds(
                         std::max(deadline - absl::Now(), absl::Milliseconds(1))));
  } catch (const std::exception& e) {
    return StoreWaitError("not every rank mapped the segment", timeout, deadline, e);
  }
  return absl::OkStatus();
}
// Sleeping waiters wake this often to look for exited peers and deadlines.
constexpr absl::Duration kWakeInterval = absl::Milliseconds(10);

}  // namespace

std::string ShmCommunicator::HostIdentity() {
  char host[256] = {};
  gethostname(host, sizeof(host) - 1);
  return absl::StrCat(host, "|", ReadFirstLine("/proc/sys/kernel/random/boot_id"), "|",
                      Link("/proc/self/ns/ipc"), "|", Link("/proc/self/ns/pid"));
}

absl::StatusOr<std::unique_ptr<ShmCommunicator>> ShmCommunicator::Create(
    const Options& options, gloo::rendezvous::Store& store) {
  if (options.world_size < 1 || options.world_size > kMaxRanks || options.rank < 0 ||
      options.rank >= options.world_size) {
    return absl::InvalidArgumentError(
        absl::StrCat("shm: rank must be in [0, world_size) and world_size in [1, ", kMaxRanks,
                     "], got rank ", options.rank, " of ", options.world_size));
  }
  if (options.slot_bytes < 4 || options.timeout <= absl::ZeroDuration()) {
    return absl::InvalidArgumentError("shm: slot_bytes must be >= 4 and timeout positive");
  }
  Options o = options;
  o.slot_bytes = RoundUp(options.slot_bytes, 64);
  if (o.world_size == 1) {
    return std::unique_ptr<ShmCommunicator>(new ShmCommunicator(o, nullptr, 0));
  }
  const absl::Time deadline = absl::Now() + o.timeout;
  const int64_t data_offset = RoundUp(sizeof(Header), 4096);
  const int64_t bytes = data_offset + 2 * int64_t{o.world_size} * o.slot_bytes;

  std::string name;
  int fd = -1;
  if (o.rank == 0) {
    std::random_device random;
    for (int attempt = 0; attempt < 16 && fd < 0; ++attempt) {
      name = absl::StrCat(kSegmentPrefix, getpid(), "-",
                          absl::Hex(uint64_t{random()} << 32 | random(), absl::kZeroPad16));
      fd = shm_open(name.c_str(), O_CREAT | O_EXCL | O_RDWR, 0600);
      if (fd < 0 && errno != EEXIST) break;
    }
    if (fd < 0) {
      return absl::InternalError(
          absl::StrCat("shm: cannot create a segment (", name, "): ", std::strerror(errno)));
    }
    if (ftruncate(fd, bytes) != 0) {
      const int err = errno;
      close(fd);
      shm_unlink(name.c_str());
      return absl::ResourceExhaustedError(absl::StrCat("shm: cannot size ", name, " to ", bytes,
                                                       " bytes: ", std::strerror(err)));
    }
  } else {
    try {
      const auto remaining = absl::ToChronoMilliseconds(
          std::max(deadline - absl::Now(), absl::Milliseconds(1)));
      store.wait({kSegmentKey}, remaining);
      const std::vector<char> value = store.get(kSegmentKey);
      name.assign(value.begin(), value.end());
    } catch (const std::exception& e) {
      return StoreWaitError("rank 0 did not publish its segment", o.timeout, deadline, e);
    }
    if (name.rfind(kSegmentPrefix, 0) != 0) {
      return absl::InternalError(absl::StrCat("shm join: unexpected segment name \"", name, "\""));
    }
    fd = shm_open(name.c_str(), O_RDWR, 0);
    if (fd < 0) {
      return absl::FailedPreconditionError(absl::StrCat(
          "shm join: cannot open rank 0's segment ", name, ": ", std::strerror(errno),
          " (ranks on different hosts or IPC namespaces? use gloo collectives)"));
    }
    struct stat st {};
    if (fstat(fd, &st) != 0 || st.st_size != bytes) {
      close(fd);
      return absl::FailedPreconditionError(
          absl::StrCat("shm join: segment ", name, " has ", st.st_size, " bytes, expected ", bytes,
                       " (ranks with different world_size or slot_bytes)"));
    }
  }
  void* base = mmap(nullptr, static_cast<size_t>(bytes), PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
  const int map_errno = errno;
  close(fd);
  if (base == MAP_FAILED) {
    if (o.rank == 0) shm_unlink(name.c_str());
    return absl::InternalError(absl::StrCat("shm: mmap ", name, ": ", std::strerror(map_errno)));
  }
  std::unique_ptr<ShmCommunicator> comm(new ShmCommunicator(o, base, bytes));
  comm->name_ = name;
  Header& h = *comm->header_;
  if (o.rank == 0) {
    h.version = Header::kVersion;
    h.world_size = o.world_size;
    h.slot_bytes = o.slot_bytes;
    h.data_offset = data_offset;
    A(h.magic).store(Header::kMagic, std::memory_order_release);
    try {
      store.set(kSegmentKey, std::vector<char>(name.begin(), name.end()));
    } catch (const std::exception& e) {
      shm_unlink(name.c_str());
      return absl::UnavailableError(absl::StrCat("shm join: rendezvous store: ", e.what()));
    }
  } else if (A(h.magic).load(std::memory_order_acquire) != Header::kMagic ||
             h.version != Header::kVersion || h.world_size != o.world_size ||
             h.slot_bytes != o.slot_bytes || h.data_offset != data_offset) {
    return absl::FailedPreconditionError(absl::StrCat(
        "shm join: segment ", name, " was made for another group layout (world ", h.world_size,
        ", slot ", h.slot_bytes, " bytes; this rank: world ", o.world_size, ", slot ",
        o.slot_bytes, ")"));
  }
  absl::Status joined = MeetInStore(store, o.rank, o.world_size, o.timeout, deadline);
  if (joined.ok()) joined = comm->Join("join", deadline);
  // Every rank has mapped it (or never will): the name can go. Each rank
  // unlinks (the first one wins), so none returns while the name exists.
  shm_unlink(name.c_str());
  if (!joined.ok()) return joined;
  return comm;
}

ShmCommunicator::ShmCommunicator(const Options& options, void* base, int64_t bytes)
    : options_(options),
      base_(base),
      bytes_(bytes),
      header_(static_cast<Header*>(base)),
      pid_ns_(NamespaceInode("/proc/self/ns/pid")) {}

ShmCommunicator::~ShmCommunicator() {
  if (base_ == nullptr) return;
  // A rank that leaves ends the group: a peer still calling fails at once
  // instead of waiting for its timeout.
  Break();
  munmap(base_, static_cast<size_t>(bytes_));
}

absl::Status ShmCommunicator::Join(const char* what, absl::Time deadline) {
  Header::RankInfo& me = header_->ranks[options_.rank];
  char state = '?';
  uint64_t start_time = 0;
  ReadProcStat(getpid(), &state, &start_time);
  me.pid = getpid();
  me.start_time = start_time;
  me.pid_ns = pid_ns_;
  A(me.joined).store(1, std::memory_order_release);
  return Arrive(what, deadline);
}

float* ShmCommunicator::Slot(int phase, int32_t rank) const {
  const int64_t index = int64_t{phase} * options_.world_size + rank;
  return reinterpret_cast<float*>(static_cast<char*>(base_) + header_->data_offset +
                                  index * options_.slot_bytes);
}

void ShmCommunicator::Abort() {
  if (base_ != nullptr) Break();  // one rank: no group, nothing to wake
}

void ShmCommunicator::Break() {
  A(header_->broken).store(1, std::memory_order_seq_cst);
  FutexWake(&header_->generation);
}

absl::Status ShmCommunicator::Broken(const char* what) const {
  return absl::UnavailableError(absl::StrCat(
      "shm ", what, ": the group is broken (a rank timed out, exited, left or aborted earlier)"));
}

absl::Status ShmCommunicator::Arrive(const char* what, absl::Time deadline) {
  Header& h = *header_;
  const int32_t world = options_.world_size;
  if (A(h.broken).load(std::memory_order_acquire) != 0) return Broken(what);
  const uint32_t round = ++round_;
  A(h.ranks[options_.rank].arrivals).store(round, std::memory_order_relaxed);
  // The generation cannot move before this rank arrives.
  const uint32_t gen = A(h.generation).load(std::memory_order_acquire);
  if (A(h.arrived).fetch_add(1, std::memory_order_acq_rel) + 1 == static_cast<uint32_t>(world)) {
    // Last one in: reset for the next round, then release everyone (the
    // reset is ordered before the bump, which waiters acquire).
    A(h.arrived).store(0, std::memory_order_relaxed);
    A(h.generation).fetch_add(1, std::memory_order_seq_cst);
    if (A(h.sleepers).load(std::memory_order_seq_cst) != 0) FutexWake(&h.generation);
    return absl::OkStatus();
  }
  // Spin a little: at a barrier the peer is usually microseconds away.
  const auto spin_end = SteadyClock::now() + absl::ToChronoNanoseconds(options_.spin);
  for (uint32_t i = 1;; ++i) {
    if (A(h.generation).load(std::memory_order_acquire) != gen) return absl::OkStatus();
    CpuRelax();
    if ((i & 63) == 0) {
      if (A(h.broken).load(std::memory_order_relaxed) != 0) return Broken(what);
      if (SteadyClock::now() >= spin_end) break;
    }
  }
  // Then sleep on the futex (the waker checks `sleepers` after bumping the
  // generation; both sides seq_cst, so one of them sees the other).
  A(h.sleepers).fetch_add(1, std::memory_order_seq_cst);
  absl::Status result;
  while (A(h.generation).load(std::memory_order_seq_cst) == gen) {
    if (A(h.broken).load(std::memory_order_acquire) != 0) {
      result = Broken(what);
      break;
    }
    std::vector<int32_t> missing, exited;
    for (int32_t q = 0; q < world; ++q) {
      Header::RankInfo& peer = h.ranks[q];
      if (A(peer.arrivals).load(std::memory_order_relaxed) == round) continue;
      missing.push_back(q);
      // Only a peer in our pid namespace can be looked up by pid.
      if (q != options_.rank && A(peer.joined).load(std::memory_order_acquire) != 0 &&
          peer.pid_ns == pid_ns_ && !ProcessAlive(peer.pid, peer.start_time)) {
        exited.push_back(q);
      }
    }
    if (!exited.empty()) {
      result = absl::UnavailableError(absl::StrCat(
          "shm ", what, ": rank(s) ", absl::StrJoin(exited, ","), " exited (pid ",
          h.ranks[exited[0]].pid, ") while rank ", options_.rank, " waited for them"));
      Break();
      break;
    }
    const absl::Duration left = deadline - absl::Now();
    if (left <= absl::ZeroDuration()) {
      result = absl::DeadlineExceededError(absl::StrCat(
          "shm ", what, ": rank(s) ", absl::StrJoin(missing, ","), " did not arrive within ",
          absl::FormatDuration(options_.timeout), " (rank ", options_.rank, " waited, round ",
          round, ")"));
      Break();
      break;
    }
    FutexWait(&h.generation, gen, std::min(left, kWakeInterval));
  }
  A(h.sleepers).fetch_sub(1, std::memory_order_seq_cst);
  return result;
}

absl::Status ShmCommunicator::DoAllReduceSum(float* data, int64_t count) {
  const int32_t world = options_.world_size;
  if (world == 1 || count == 0) return absl::OkStatus();
  const absl::Time deadline = absl::Now() + options_.timeout;
  const int64_t per_slot = options_.slot_bytes / int64_t{sizeof(float)};
  for (int64_t off = 0; off < count; off += per_slot) {
    const int64_t n = std::min(per_slot, count - off);
    const int phase = static_cast<int>(round_ & 1);  // the round Arrive is about to do
    std::memcpy(Slot(phase, options_.rank), data + off, sizeof(float) * static_cast<size_t>(n));
    if (absl::Status s = Arrive("all-reduce", deadline); !s.ok()) return s;
    // Rank order, element by element: the same additions on every rank.
    float* out = data + off;
    const float* s0 = Slot(phase, 0);
    const float* s1 = Slot(phase, 1);
    for (int64_t i = 0; i < n; ++i) out[i] = s0[i] + s1[i];
    for (int32_t q = 2; q < world; ++q) {
      const float* sq = Slot(phase, q);
      for (int64_t i = 0; i < n; ++i) out[i] += sq[i];
    }
  }
  return absl::OkStatus();
}

absl::Status ShmCommunicator::DoGatherToRank0(const float* send, int64_t count, float* recv) {
  const int32_t world = options_.world_size;
  if (world == 1) {
    if (count > 0 && recv != send) std::memcpy(recv, send, sizeof(float) * static_cast<size_t>(count));
    return absl::OkStatus();
  }
  if (count == 0) return absl::OkStatus();
  const absl::Time deadline = absl::Now() + options_.timeout;
  const int64_t per_slot = options_.slot_bytes / int64_t{sizeof(float)};
  for (int64_t off = 0; off < count; off += per_slot) {
    const int64_t n = std::min(per_slot, count - off);
    const int phase = static_cast<int>(round_ & 1);
    std::memcpy(Slot(phase, options_.rank), send + off, sizeof(float) * static_cast<size_t>(n));
    if (absl::Status s = Arrive("gather", deadline); !s.ok()) return s;
    if (options_.rank == 0) {
      for (int32_t q = 0; q < world; ++q) {
        std::memcpy(recv + q * count + off, Slot(phase, q), sizeof(float) * static_cast<size_t>(n));
      }
    }
  }
  return absl::OkStatus();
}

absl::Status ShmCommunicator::DoBarrier() {
  if (options_.world_size == 1) return absl::OkStatus();
  return Arrive("barrier", absl::Now() + options_.timeout);
}

}  // namespace folio
