// The profiler: one event per op (name, device, worker, push/start/end, reads, writes), exported
// as Chrome trace JSON, which Perfetto and chrome://tracing open.
#include <cmath>
#include <cstdio>
#include <type_traits>
#include <utility>

#include "asyncnd/detail/backend.h"
#include "engine/engine_impl.h"

namespace asyncnd {
namespace detail {

namespace {

// The trace's text, appended in place: reserved from the event count, where a string stream's
// buffer doubled as it grew and str() then copied it out. With the events that made three or four
// copies of a long recording at once (3.5 M ops filled the npm package's 2 GiB heap). Numbers are
// written without a locale: a program's global locale could put a comma in a time.
struct JsonOut {
  std::string s;
  JsonOut& operator<<(const char* t) {
    s += t;
    return *this;
  }
  JsonOut& operator<<(char c) {
    s += c;
    return *this;
  }
  JsonOut& operator<<(const std::string& t) {
    s += t;
    return *this;
  }
  template <typename Int, typename = std::enable_if_t<std::is_integral<Int>::value>>
  JsonOut& operator<<(Int v) {
    s += std::to_string(v);
    return *this;
  }
  // Microseconds with three decimals (nanoseconds), as the trace has always had them.
  JsonOut& operator<<(double us) {
    long long ns = std::isfinite(us) ? std::llround(us * 1000.0) : 0;
    if (ns < 0) {
      s += '-';
      ns = -ns;
    }
    char frac[4] = {static_cast<char>('0' + ns / 100 % 10), static_cast<char>('0' + ns / 10 % 10),
                    static_cast<char>('0' + ns % 10), '\0'};
    s += std::to_string(ns / 1000);
    s += '.';
    s += frac;
    return *this;
  }
};

// The length of the well-formed multi-byte UTF-8 sequence at s[i] (2 to 4), or 0 if none is.
std::size_t utf8_length(const std::string& s, std::size_t i) {
  const auto at = [&](std::size_t k) { return static_cast<unsigned char>(s[k]); };
  const unsigned char c = at(i);
  std::size_t n = 0;
  unsigned char lo = 0x80, hi = 0xBF;  // the second byte's range (RFC 3629, section 4)
  if (c >= 0xC2 && c <= 0xDF) {
    n = 2;
  } else if (c >= 0xE0 && c <= 0xEF) {  // no overlong form, no surrogate
    n = 3;
    if (c == 0xE0) lo = 0xA0;
    if (c == 0xED) hi = 0x9F;
  } else if (c >= 0xF0 && c <= 0xF4) {  // no overlong form, nothing past U+10FFFF
    n = 4;
    if (c == 0xF0) lo = 0x90;
    if (c == 0xF4) hi = 0x8F;
  } else {
    return 0;
  }
  if (i + n > s.size() || at(i + 1) < lo || at(i + 1) > hi) return 0;
  for (std::size_t k = 2; k < n; ++k)
    if (at(i + k) < 0x80 || at(i + k) > 0xBF) return 0;
  return n;
}

// A JSON string: quotes, backslashes and control characters escaped, and a byte that does not
// start well-formed UTF-8 written as U+FFFD (an op named with one made the whole trace unreadable
// to a JSON parser).
void json_string(JsonOut& os, const std::string& s) {
  os << '"';
  for (std::size_t i = 0; i < s.size(); ++i) {
    const char c = s[i];
    const auto u = static_cast<unsigned char>(c);
    if (c == '"') {
      os << "\\\"";
    } else if (c == '\\') {
      os << "\\\\";
    } else if (c == '\n') {
      os << "\\n";
    } else if (u < 0x20) {
      char buf[8];
      std::snprintf(buf, sizeof buf, "\\u%04x", u);
      os << buf;
    } else if (u < 0x80) {
      os << c;
    } else if (const std::size_t n = utf8_length(s, i)) {
      os.s.append(s, i, n);
      i += n - 1;
    } else {
      os << "\\ufffd";
    }
  }
  os << '"';
}

void json_ids(JsonOut& os, const std::vector<std::uint64_t>& ids) {
  os << '[';
  for (std::size_t i = 0; i < ids.size(); ++i) os << (i ? "," : "") << ids[i];
  os << ']';
}

// Chrome trace has processes and threads: a device is a process, a worker a thread; ops run
// inline on a frontend thread go to thread 0 ("frontend"); a device queue's spans (lane) to
// threads from 1000 on, one per lane, in the order the lanes appear.
int pid_of(Device d) { return d.is_cpu() ? 1 : 100 + d.id; }
int tid_of(const ProfileEvent& e, const std::vector<std::string>& lanes) {
  if (e.lane.empty()) return e.worker < 0 ? 0 : e.worker + 1;
  for (std::size_t i = 0; i < lanes.size(); ++i)
    if (lanes[i] == e.lane) return 1000 + static_cast<int>(i);
  return 999;  // not reached: every lane is listed first
}
std::string thread_label(const ProfileEvent& e) {
  if (!e.lane.empty()) return e.lane;
  return e.worker < 0 ? std::string("frontend") : "worker " + std::to_string(e.worker);
}

}  // namespace

void EngineImpl::start_profiling() {
  std::lock_guard<std::mutex> lk(prof_mu_);
  events_.clear();
  events_lost_.store(0, std::memory_order_relaxed);
  prof_session_.fetch_add(1, std::memory_order_relaxed);
  t0_ns_ = profiler_clock_ns();
  for (Backend* b : active_backends()) b->set_device_timing(true);
  profiling_.store(true);
}

void EngineImpl::record_event(OprBlock* op, int worker, double start_us, double end_us,
                              bool failed, bool skipped) noexcept {
  if (op->prof_session != prof_session_.load(std::memory_order_relaxed)) return;
  try {
    record_event_or_throw(op, worker, start_us, end_us, failed, skipped);
  } catch (const std::bad_alloc&) {
    // Out of memory on a worker: the op's own outcome matters more than its line in the trace,
    // and an exception here would end the process. The trace says how many it lost.
    events_lost_.fetch_add(1, std::memory_order_relaxed);
  }
}

void EngineImpl::record_event_or_throw(OprBlock* op, int worker, double start_us, double end_us,
                                       bool failed, bool skipped) {
  ProfileEvent e;
  e.name = op->name;
  e.device = op->device;
  e.worker = worker;
  e.async = op->async;
  e.push_us = op->push_us;
  e.start_us = start_us;
  e.end_us = end_us;
  e.reads.reserve(static_cast<std::size_t>(op->nreads));
  for (int i = 0; i < op->nreads; ++i) e.reads.push_back(op->acc[i].var->id);
  for (int i = 0; i < op->nwrites; ++i) e.writes.push_back(op->acc[op->nreads + i].var->id);
  e.failed = failed;
  e.skipped = skipped;
  std::lock_guard<std::mutex> lk(prof_mu_);
  events_.push_back(std::move(e));
}

std::vector<ProfileEvent> EngineImpl::profile_events() const {
  std::lock_guard<std::mutex> lk(prof_mu_);
  return events_;
}

std::string EngineImpl::stop_profiling() {
  profiling_.store(false);
  // Device-side spans (Backend::take_device_spans), on the same timeline as the ops.
  for (Backend* b : active_backends()) {
    b->set_device_timing(false);
    for (Backend::DeviceSpan& s : b->take_device_spans()) {
      ProfileEvent e;
      e.name = std::move(s.name);
      e.device = s.device;
      e.lane = std::move(s.lane);
      e.start_us = e.push_us = static_cast<double>(s.start_ns - t0_ns_) / 1e3;
      e.end_us = static_cast<double>(s.end_ns - t0_ns_) / 1e3;
      std::lock_guard<std::mutex> lk(prof_mu_);
      events_.push_back(std::move(e));
    }
  }
  // The events are moved out, not copied (a long recording's events are most of the memory this
  // takes), and back in at the end, also when building the text throws: profile_events() has
  // them until the next start. An op that was finishing as profiling stopped may still add its
  // event meanwhile: it goes after these (and, as before, not into this text). A start in
  // between keeps its own recording.
  std::vector<ProfileEvent> events;
  std::uint32_t session = 0;
  {
    std::lock_guard<std::mutex> lk(prof_mu_);
    events.swap(events_);
    session = prof_session_.load(std::memory_order_relaxed);
  }
  struct PutBack {
    EngineImpl* self;
    std::vector<ProfileEvent>& events;
    std::uint32_t session;
    ~PutBack() {
      std::lock_guard<std::mutex> lk(self->prof_mu_);
      std::vector<ProfileEvent>& late = self->events_;
      if (self->prof_session_.load(std::memory_order_relaxed) != session) return;
      // These first, then any recorded meanwhile. Should there be no memory for both (the insert
      // leaves `events` as it was), the late ones go: better than the recording.
      try {
        events.insert(events.end(), std::make_move_iterator(late.begin()),
                      std::make_move_iterator(late.end()));
      } catch (...) {
      }
      late.swap(events);
    }
  };
  const PutBack put_back{this, events, session};
  std::vector<std::string> lanes;
  for (const ProfileEvent& e : events) {
    bool known = e.lane.empty();
    for (const std::string& l : lanes) known = known || l == e.lane;
    if (!known) lanes.push_back(e.lane);
  }
  JsonOut os;
  os.s.reserve(256 + 200 * events.size());  // about 170 bytes an op, a little more with lanes
  os << "{\"displayTimeUnit\":\"ms\",";
  // Ops a worker could not record for want of memory (record_event): said, not hidden.
  if (const std::uint64_t lost = events_lost_.load(std::memory_order_relaxed))
    os << "\"otherData\":{\"ops_not_recorded_out_of_memory\":" << lost << "},";
  os << "\"traceEvents\":[";
  bool first = true;
  auto sep = [&] {
    if (!first) os << ",\n";
    first = false;
  };
  // Name the processes and threads that appear.
  std::vector<std::pair<int, int>> seen;
  for (const ProfileEvent& e : events) {
    std::pair<int, int> key{pid_of(e.device), tid_of(e, lanes)};
    bool known = false;
    for (auto& s : seen) known = known || s == key;
    if (known) continue;
    bool pid_known = false;
    for (auto& s : seen) pid_known = pid_known || s.first == key.first;
    seen.push_back(key);
    if (!pid_known) {
      sep();
      os << "{\"ph\":\"M\",\"name\":\"process_name\",\"pid\":" << key.first
         << ",\"args\":{\"name\":\"" << e.device.str() << "\"}}";
    }
    sep();
    os << "{\"ph\":\"M\",\"name\":\"thread_name\",\"pid\":" << key.first
       << ",\"tid\":" << key.second << ",\"args\":{\"name\":";
    json_string(os, thread_label(e));
    os << "}}";
  }
  std::size_t async_id = 0;
  for (const ProfileEvent& e : events) {
    sep();
    // An async op is an async slice: it begins here with the op's arguments and ends below (same
    // id and name); any other op is one complete event.
    const auto head = [&](const char* ph, double ts) {
      os << "{\"ph\":\"" << ph << "\",\"cat\":\""
         << (e.async ? "async op" : e.lane.empty() ? "op" : "device") << "\"";
      if (e.async) os << ",\"id\":" << async_id;
      os << ",\"name\":";
      json_string(os, e.name);
      os << ",\"pid\":" << pid_of(e.device) << ",\"tid\":" << tid_of(e, lanes) << ",\"ts\":" << ts;
    };
    if (e.async) ++async_id;
    head(e.async ? "b" : "X", e.start_us);
    if (!e.async) os << ",\"dur\":" << (e.end_us - e.start_us);
    os << ",\"args\":{\"reads\":";
    json_ids(os, e.reads);
    os << ",\"writes\":";
    json_ids(os, e.writes);
    os << ",\"queued_us\":" << (e.start_us - e.push_us) << ",\"failed\":"
       << (e.failed ? "true" : "false") << ",\"skipped\":" << (e.skipped ? "true" : "false")
       << "}}";
    if (e.async) {
      sep();
      head("e", e.end_us);
      os << "}";
    }
  }
  os << "]}\n";
  return std::move(os.s);
}

}  // namespace detail
}  // namespace asyncnd
