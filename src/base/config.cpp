#include "base/config.hpp"

#include <cctype>
#include <cmath>
#include <cstdlib>
#include <iomanip>
#include <sstream>
#include <string>

#include "strata/error.hpp"

namespace strata {
namespace {

// A number variable: its value when set, else `fallback`. Anything but a finite number in
// [lo, hi] (and a whole one where `whole`) is refused, naming the variable, its value and the
// range: nan, inf or 1e30 seconds must not reach a deadline's arithmetic.
double number(const char* name, double fallback, double lo, double hi, bool whole = true) {
  const char* v = std::getenv(name);
  if (!v || !*v) return fallback;
  char* end = nullptr;
  const double d = std::strtod(v, &end);
  const bool is_number = end != v && *end == '\0' && !std::isspace(static_cast<unsigned char>(*v));
  if (!is_number || !std::isfinite(d) || d < lo || d > hi || (whole && d != std::floor(d))) {
    std::ostringstream range;
    range << std::setprecision(12) << (whole ? "a whole number" : "a number") << " from " << lo
          << " to " << hi;
    throw Error(ErrorCode::invalid_argument, {.op = "config"},
                std::string(name) + "='" + v + "' is not " + range.str());
  }
  return d;
}

std::string text(const char* name) {
  const char* v = std::getenv(name);
  return v ? v : "";
}

Config load() {
  Config c;
  // Seconds: at least a millisecond, at most 30 days (far from int64 milliseconds' overflow).
  c.timeout = std::chrono::milliseconds(
      int64_t(number("STRATA_TIMEOUT", 300, 0.001, 30 * 86400, false) * 1000));
  c.spin = std::chrono::microseconds(int64_t(number("STRATA_SPIN_US", 20000, 0, 1e7)));
  c.progress_delay =
      std::chrono::microseconds(int64_t(number("STRATA_PROGRESS_DELAY_US", 50, 0, 1e7)));
  c.algo = text("STRATA_ALGO");
  c.store_addr = text("STRATA_STORE_ADDR");
  c.store_port = int(number("STRATA_STORE_PORT", -1, 0, 65535));  // -1: unset
  c.store_outside = number("STRATA_STORE_OUTSIDE", 0, 0, 1) != 0;
  c.shm = number("STRATA_SHM", 1, 0, 1) != 0;
  c.shm_chunk_bytes = size_t(number("STRATA_SHM_CHUNK", 256 * 1024, 4096, 1 << 30));
  c.shm_depth = int(number("STRATA_SHM_DEPTH", 4, 2, 64));
  // STRATA_SHM_STORES is the variable's former name, still read when the new one is unset.
  std::string mode = text("STRATA_SHM_WRITE_MODE");
  const char* name = "STRATA_SHM_WRITE_MODE";
  if (mode.empty() && !text("STRATA_SHM_STORES").empty()) {
    mode = text("STRATA_SHM_STORES");
    name = "STRATA_SHM_STORES";
  }
  if (mode == "ordinary")
    c.shm_write_mode = ShmWriteMode::ordinary;
  else if (mode == "streaming")
    c.shm_write_mode = ShmWriteMode::streaming;
  else if (mode == "single_copy")
    c.shm_write_mode = ShmWriteMode::single_copy;
  else if (!mode.empty() && mode != "auto") {
    throw Error(
        ErrorCode::invalid_argument, {.op = "config"},
        std::string(name) + "='" + mode + "' is not auto, ordinary, streaming or single_copy");
  }
  // The log reads STRATA_DEBUG itself (base/log.cpp, before any configuration); a value it
  // does not know is refused here, like every other variable's, instead of meaning WARN.
  if (const std::string d = text("STRATA_DEBUG");
      !d.empty() && d != "NONE" && d != "0" && d != "WARN" && d != "INFO" && d != "TRACE") {
    throw Error(ErrorCode::invalid_argument, {.op = "config"},
                "STRATA_DEBUG='" + d + "' is not NONE (or 0), WARN, INFO or TRACE");
  }
  c.node_id = text("STRATA_NODE_ID");
  c.topo_file = text("STRATA_TOPO_FILE");
  c.flight_records = size_t(number("STRATA_FLIGHT_RECORDER", 128, 0, 1 << 20));
  c.dump_dir = text("STRATA_DUMP_DIR");
  c.check = number("STRATA_CHECK", 0, 0, 1) != 0;
  c.device_path = text("STRATA_DEVICE_PATH");
  if (!c.device_path.empty() && c.device_path != "nccl" && c.device_path != "staged") {
    throw Error(ErrorCode::invalid_argument, {.op = "config"},
                "STRATA_DEVICE_PATH='" + c.device_path + "' is not nccl or staged");
  }
  c.stage_chunk_bytes = size_t(number("STRATA_STAGE_CHUNK", 4 << 20, 4096, 1 << 30));
  return c;
}

}  // namespace

const Config& config() {
  static const Config c = load();
  return c;
}

}  // namespace strata
