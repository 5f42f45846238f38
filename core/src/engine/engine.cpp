// The public Engine and Var: thin forwarding to EngineImpl, the process-wide engine, and
// EngineOptions::from_env.
#include <algorithm>
#include <climits>
#include <cmath>
#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <exception>
#include <sstream>
#include <string>
#include <vector>

#include <pthread.h>

#include "asyncnd/detail/backend.h"
#include "asyncnd/detail/env.h"
#include "engine/engine_impl.h"

namespace asyncnd {

const char* pacing_name(Pacing pacing) {
  switch (pacing) {
    case Pacing::kAuto: return "auto";
    case Pacing::kRuns: return "runs";
    case Pacing::kOps: return "ops";
  }
  return "?";
}

namespace detail {
bool on_engine_worker();
}

// ---------------------------------------------------------------------------------------------
// Var

Var::Var(const Var& other) noexcept : p_(other.p_) {
  if (p_) p_->refs.fetch_add(1, std::memory_order_relaxed);
}

Var& Var::operator=(const Var& other) noexcept {
  if (other.p_) other.p_->refs.fetch_add(1, std::memory_order_relaxed);
  detail::VarBlock* old = p_;
  p_ = other.p_;
  if (old) release(old);  // through release: in a forked child it is left as it is
  return *this;
}

void Var::release(detail::VarBlock* p) noexcept {
  if (detail::forked_child()) return;  // left as it is (engine_impl.h)
  detail::EngineImpl::release_var(p);
}

std::uint64_t Var::id() const { return p_ ? p_->id : 0; }
bool Var::deleted() const { return p_ && p_->deleted.load(std::memory_order_acquire); }

// ---------------------------------------------------------------------------------------------
// Completion

Completion& Completion::operator=(Completion&& other) noexcept {
  if (this != &other) {
    Completion dropped(std::move(*this));  // the handle we held is dropped, as by ~Completion
    op_.store(other.op_.exchange(nullptr));
  }
  return *this;
}

Completion::~Completion() {
  detail::OprBlock* held = op_.load(std::memory_order_acquire);
  if (!held) return;
  if (std::uncaught_exceptions() > 0 && detail::EngineImpl::current_async_op() == held) {
    // fn is throwing: the worker completes the op with that exception, not "dropped" (or, should
    // fn catch it itself and return, as dropped: run_async).
    detail::OprBlock* op = op_.exchange(nullptr, std::memory_order_acq_rel);
    if (op) {
      op->async_dropped_unwinding.store(true, std::memory_order_release);
      op->engine->release_async(op);
    }
    return;
  }
  // Never destroyed, as the engine: workers go on during exit, and a Completion dropped then
  // (in an atexit handler, or by an op still running) read a string exit had freed.
  static const std::string* const kDropped =
      new std::string(detail::kCompletionDropped);
  complete(kDropped);
}

void Completion::done() { complete(nullptr); }
void Completion::fail(const std::string& message) { complete(&message); }

void Completion::complete(const std::string* error) noexcept {
  detail::OprBlock* op = op_.exchange(nullptr, std::memory_order_acq_rel);
  if (!op) return;
  detail::EngineImpl* engine = op->engine;
  engine->begin_completion();  // before the op can finish: see begin_completion
  if (!op->async_done.exchange(true, std::memory_order_acq_rel)) {
    if (error) op->async_failed = detail::EngineImpl::op_error(op, *error);
    engine->arrive_async(op);
  }
  engine->release_async(op);
  engine->end_completion();  // the last touch of the engine
}

// ---------------------------------------------------------------------------------------------
// EngineOptions

const char* bound_source_name(BoundSource source) {
  switch (source) {
    case BoundSource::kNone: return "none";
    case BoundSource::kCgroup: return "cgroup";
    case BoundSource::kPhysical: return "physical";
    case BoundSource::kWasmHeap: return "wasm heap";
    case BoundSource::kEnv: return "env";
    case BoundSource::kUser: return "user";
  }
  return "?";
}

namespace detail {

MemoryLimit memory_limit_from(const char* cgroup_v2, const char* cgroup_v1,
                              std::uint64_t physical) {
  MemoryLimit m{physical, physical ? BoundSource::kPhysical : BoundSource::kNone};
  for (const char* text : {cgroup_v2, cgroup_v1}) {
    if (!text) continue;
    std::uint64_t v = 0;
    const char* c = text;
    for (; *c >= '0' && *c <= '9'; ++c) {
      if (v > (UINT64_MAX - 9) / 10) break;  // overflowing: no usable limit
      v = v * 10 + static_cast<std::uint64_t>(*c - '0');
    }
    // "max" (v2) has no digits; v1's "unlimited" is about 2^63 (a page-rounded LONG_MAX): 2^62
    // or more is no limit, even where physical memory is unknown.
    const bool number = c != text && (*c == '\0' || *c == '\n');
    const bool unlimited = v >= (std::uint64_t(1) << 62);
    if (number && v > 0 && !unlimited && (physical == 0 || v < physical))
      m = {v, BoundSource::kCgroup};
    if (number || std::strncmp(text, "max", 3) == 0) break;  // the first readable file decides
  }
  return m;
}

namespace {
// A whole number at the start of `text` (after blanks), or -1: none, a sign, or too large.
long long leading_count(const char*& text) {
  while (*text == ' ' || *text == '\t') ++text;
  if (*text < '0' || *text > '9') return -1;
  long long v = 0;
  for (; *text >= '0' && *text <= '9'; ++text) {
    if (v > (LLONG_MAX - 9) / 10) return -1;
    v = v * 10 + (*text - '0');
  }
  return v;
}
bool at_end(const char* text) {
  while (*text == ' ' || *text == '\t' || *text == '\n') ++text;
  return *text == '\0';
}
}  // namespace

double cpu_quota_from(const char* v2_cpu_max, const char* v1_quota, const char* v1_period) {
  if (v2_cpu_max) {
    const char* c = v2_cpu_max;
    const long long quota = leading_count(c);  // -1 for "max"
    const long long period = leading_count(c);
    if (quota > 0 && period > 0 && at_end(c)) return static_cast<double>(quota) / period;
    if (std::strncmp(v2_cpu_max, "max", 3) == 0) return 0;  // parses: no quota, v1 not asked
  }
  if (v1_quota && v1_period) {
    const char *q = v1_quota, *p = v1_period;
    const long long quota = leading_count(q), period = leading_count(p);  // -1 for "-1"
    if (quota > 0 && period > 0 && at_end(q) && at_end(p)) {
      return static_cast<double>(quota) / period;
    }
  }
  return 0;
}

namespace {
// Whether the comma-separated `list` has `item` ("rw,cpu,cpuacct" has "cpu").
bool lists(const std::string& list, const char* item) {
  return (',' + list + ',').find(',' + std::string(item) + ',') != std::string::npos;
}
// A mountinfo field with the kernel's octal escapes (\040 for a space, \011, \012, \134 for a
// backslash) turned back into their characters.
std::string unescape_mount_field(const std::string& s) {
  std::string out;
  for (std::size_t i = 0; i < s.size(); ++i) {
    const auto octal = [&](std::size_t j) { return j < s.size() && s[j] >= '0' && s[j] <= '7'; };
    if (s[i] == '\\' && octal(i + 1) && octal(i + 2) && octal(i + 3)) {
      out += static_cast<char>((s[i + 1] - '0') * 64 + (s[i + 2] - '0') * 8 + (s[i + 3] - '0'));
      i += 3;
    } else {
      out += s[i];
    }
  }
  return out;
}
std::vector<std::string> split_on(const std::string& s, char sep) {
  std::vector<std::string> parts;
  std::istringstream in(s);
  for (std::string part; std::getline(in, part, sep);) parts.push_back(part);
  return parts;
}
}  // namespace

std::vector<std::string> cgroup_dirs_from(const std::string& mountinfo,
                                          const std::string& proc_cgroup,
                                          const char* v1_controller) {
  // The group's path in the hierarchy: "0::/path" for v2, "N:cpu,cpuacct:/path" for v1.
  std::string group;
  bool listed = false;
  for (const std::string& line : split_on(proc_cgroup, '\n')) {
    const auto a = line.find(':');
    const auto b = a == std::string::npos ? a : line.find(':', a + 1);
    if (b == std::string::npos) continue;
    const std::string controllers = line.substr(a + 1, b - a - 1);
    if (v1_controller ? lists(controllers, v1_controller)
                      : line.compare(0, a, "0") == 0 && controllers.empty()) {
      group = line.substr(b + 1);
      listed = true;
      break;
    }
  }
  std::vector<std::string> dirs;
  if (!listed) return dirs;
  // "id parent major:minor root mount-point options [optional...] - type source super-options"
  for (const std::string& line : split_on(mountinfo, '\n')) {
    const auto dash = line.find(" - ");
    if (dash == std::string::npos) continue;
    const std::vector<std::string> head = split_on(line.substr(0, dash), ' ');
    const std::vector<std::string> tail = split_on(line.substr(dash + 3), ' ');
    if (head.size() < 5 || tail.size() < 3) continue;
    if (v1_controller ? tail[0] != "cgroup" || !lists(tail[2], v1_controller)
                      : tail[0] != "cgroup2") {
      continue;
    }
    const std::string root = unescape_mount_field(head[3]);
    const std::string mount = unescape_mount_field(head[4]);
    // The group's path below the mount's root; none where the group lies outside it (a path
    // with "/.." is one outside a cgroup namespace's root).
    std::string below;
    if (group.find("/..") == std::string::npos) {
      if (root == "/") {
        below = group;
      } else if (group.compare(0, root.size(), root) == 0 &&
                 (group.size() == root.size() || group[root.size()] == '/')) {
        below = group.substr(root.size());
      }
    }
    const std::string base = mount == "/" ? "" : mount;
    for (std::string p = below; !p.empty() && p != "/"; p = p.substr(0, p.rfind('/')))
      dirs.push_back(base + p);
    dirs.push_back(mount);
  }
  return dirs;
}

CpuLimit cpu_limit_from(int online, int affinity, double quota) {
  CpuLimit l;
  l.online = online;
  l.affinity = affinity > 0 ? affinity : 0;
  l.quota = quota > 0 ? quota : 0;
  l.cpus = std::max(1, online);
  l.source = "online";
  if (l.affinity > 0 && l.affinity < l.cpus) {
    l.cpus = l.affinity;
    l.source = "affinity";
  }
  if (l.quota > 0) {
    // Rounded up, as the JVM and Go count a quota: 1.5 CPUs runs two threads part of the time.
    const double up = std::ceil(l.quota - 1e-9);
    const int q = up < 1 ? 1 : up > 1e6 ? 1000000 : static_cast<int>(up);
    if (q < l.cpus) {
      l.cpus = q;
      l.source = "cgroup";
    }
  }
  return l;
}

}  // namespace detail

EngineOptions EngineOptions::from_env() { return from_env(program_memory_limit()); }

namespace detail {

void resolve_default_bounds(EngineOptions& o, const MemoryLimit* limit) {
  // Below SIZE_MAX: that value is kDefaultBound.
  if (o.max_inflight_ops == kDefaultBound) {
    o.max_inflight_ops = kDefaultMaxInflightOps;
    if (const char* v = std::getenv("ASYNCND_MAX_INFLIGHT_OPS")) {
      o.max_inflight_ops = static_cast<std::size_t>(detail::parse_env_uint(
          "ASYNCND_MAX_INFLIGHT_OPS", v, 0, SIZE_MAX - 1, "an op count (0 = no bound)"));
    }
  }
  if (o.max_inflight_bytes == kDefaultBound) {
    if (const char* v = std::getenv("ASYNCND_MAX_INFLIGHT_BYTES")) {
      o.max_inflight_bytes = static_cast<std::size_t>(detail::parse_env_uint(
          "ASYNCND_MAX_INFLIGHT_BYTES", v, 0, SIZE_MAX - 1, "a byte count (0 = no bound)"));
      o.max_inflight_bytes_source = o.max_inflight_bytes ? BoundSource::kEnv : BoundSource::kNone;
    } else {
      const MemoryLimit machine = limit != nullptr ? *limit : program_memory_limit();
      o.max_inflight_bytes = static_cast<std::size_t>(
          std::min<std::uint64_t>(default_max_inflight_bytes(machine.bytes), SIZE_MAX - 1));
      o.max_inflight_bytes_source = o.max_inflight_bytes ? machine.source : BoundSource::kNone;
    }
  }
}

}  // namespace detail

EngineOptions EngineOptions::from_env(const MemoryLimit& limit) {
  EngineOptions o;
  detail::resolve_default_bounds(o, &limit);
  if (const char* k = std::getenv("ASYNCND_ENGINE")) {
    if (std::strcmp(k, "naive") == 0 || std::strcmp(k, "NaiveEngine") == 0) {
      o.kind = EngineKind::kNaive;
    } else if (std::strcmp(k, "threaded") != 0 && k[0] != '\0') {
      throw Error(std::string("ASYNCND_ENGINE: unknown engine '") + k +
                  "' (expected 'threaded' or 'naive')");
    }
  }
  if (const char* w = std::getenv("ASYNCND_CPU_WORKERS")) {
    o.cpu_workers = static_cast<int>(
        detail::parse_env_uint("ASYNCND_CPU_WORKERS", w, 0, kMaxCpuThreads, "a count"));
  }
  if (const char* w = std::getenv("ASYNCND_CPU_HELPERS")) {
    o.cpu_chunk_helpers = static_cast<int>(
        detail::parse_env_uint("ASYNCND_CPU_HELPERS", w, 0, kMaxCpuThreads, "a count"));
  }
  if (const char* p = std::getenv("ASYNCND_CPU_PACING"); p && *p) {  // empty: the default
    const Pacing all[] = {Pacing::kAuto, Pacing::kRuns, Pacing::kOps};
    const Pacing* found = std::find_if(std::begin(all), std::end(all), [p](Pacing x) {
      return std::strcmp(p, pacing_name(x)) == 0;
    });
    if (found == std::end(all)) {
      throw Error(std::string("ASYNCND_CPU_PACING: unknown pacing '") + p +
                  "' (expected 'auto', 'runs' or 'ops')");
    }
    o.cpu_pacing = *found;
  }
  return o;
}

// ---------------------------------------------------------------------------------------------
// Engine

Engine::Engine(EngineOptions options) : impl_(std::make_unique<detail::EngineImpl>(options)) {}
Engine::~Engine() = default;

EngineKind Engine::kind() const { return impl_->kind(); }
int Engine::num_workers(Device device) const { return impl_->num_workers(device); }
int Engine::num_chunk_helpers() const { return impl_->num_chunk_helpers(); }
Pacing Engine::pacing(Device device) const { return impl_->pacing(device); }
Var Engine::new_var() { return impl_->new_var(); }

void Engine::push(OpFunction fn, std::vector<Var> reads, std::vector<Var> writes,
                  PushOptions opts) {
  impl_->push(std::move(fn), detail::VarArray{reads.data(), reads.size()},
              detail::VarArray{writes.data(), writes.size()}, opts);
}

void Engine::push(OpFunction fn, std::initializer_list<Var> reads,
                  std::initializer_list<Var> writes, PushOptions opts) {
  impl_->push(std::move(fn), detail::VarArray{reads.begin(), reads.size()},
              detail::VarArray{writes.begin(), writes.size()}, opts);
}

void Engine::push_async(std::function<void(Completion)> fn, std::vector<Var> reads,
                        std::vector<Var> writes, PushOptions opts) {
  impl_->push_async(std::move(fn), detail::VarArray{reads.data(), reads.size()},
                    detail::VarArray{writes.data(), writes.size()}, opts);
}

void Engine::wait_to_read(const Var& v) { impl_->wait_to_read(v); }
void Engine::waitall() {
  impl_->waitall();
  // Device ops count as finished once queued on their device (Backend::launch); the barrier also
  // waits for the devices themselves. A no-op loop when no device backend is built.
  detail::synchronize_devices();
}
void Engine::delete_var(Var v, OpFunction on_delete, std::size_t bytes) {
  impl_->delete_var(std::move(v), std::move(on_delete), bytes);
}
void Engine::set_max_inflight(std::size_t ops, std::size_t bytes) {
  impl_->set_max_inflight(ops, bytes);
}
void Engine::reset_max_inflight() { impl_->reset_max_inflight(); }
std::size_t Engine::max_inflight_ops() const { return impl_->max_ops(); }
std::size_t Engine::max_inflight_bytes() const { return impl_->max_bytes(); }
EngineStats Engine::stats() const { return impl_->stats(); }
void Engine::reset_peak_bytes() { impl_->reset_peak_bytes(); }
void Engine::start_profiling() { impl_->start_profiling(); }
std::string Engine::stop_profiling() { return impl_->stop_profiling(); }
std::vector<ProfileEvent> Engine::profile_events() const { return impl_->profile_events(); }
bool Engine::profiling() const { return impl_->profiling(); }
void Engine::parallel_for(std::int64_t n, std::int64_t grain,
                          const std::function<void(std::int64_t, std::int64_t)>& fn,
                          std::int64_t work) {
  impl_->parallel_for(n, grain, fn, work);
}
bool Engine::on_worker_thread() { return detail::on_engine_worker(); }

namespace detail {
std::atomic<Engine*> g_engine{nullptr};
std::atomic<bool> g_forked_child{false};

Engine& make_engine() {
  // Never destroyed: arrays held in static storage may still be freed during exit.
  static Engine* e = [] {
#ifndef __EMSCRIPTEN__
    ::pthread_atfork(nullptr, nullptr, [] { g_forked_child.store(true); });
#endif
    return new Engine(EngineOptions::from_env());
  }();
  g_engine.store(e, std::memory_order_release);
  return *e;
}
}  // namespace detail

void configure_engine(EngineOptions options) {
  detail::EngineAccess::impl(engine()).reconfigure(options);
}

}  // namespace asyncnd
