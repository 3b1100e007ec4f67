#include "base/config.hpp"

#include <cstdlib>
#include <string>

#include "strata/error.hpp"

namespace strata {
namespace {

double number(const char* name, double fallback) {
  const char* v = std::getenv(name);
  if (!v || !*v) return fallback;
  char* end = nullptr;
  double d = std::strtod(v, &end);
  if (*end != '\0' || d < 0) {
    throw Error(ErrorCode::invalid_argument, {.op = "config"},
                std::string(name) + "='" + v + "' is not a non-negative number");
  }
  return d;
}

std::string text(const char* name) {
  const char* v = std::getenv(name);
  return v ? v : "";
}

Config load() {
  Config c;
  c.timeout = std::chrono::milliseconds(int64_t(number("STRATA_TIMEOUT", 300) * 1000));
  c.spin = std::chrono::microseconds(int64_t(number("STRATA_SPIN_US", 20000)));
  c.progress_delay = std::chrono::microseconds(int64_t(number("STRATA_PROGRESS_DELAY_US", 50)));
  c.algo = text("STRATA_ALGO");
  c.store_addr = text("STRATA_STORE_ADDR");
  c.shm = number("STRATA_SHM", 1) != 0;
  c.shm_chunk_bytes = size_t(number("STRATA_SHM_CHUNK", 256 * 1024));
  c.shm_depth = int(number("STRATA_SHM_DEPTH", 4));
  if (c.shm_chunk_bytes < 4096 || c.shm_depth < 2) {
    throw Error(ErrorCode::invalid_argument, {.op = "config"},
                "STRATA_SHM_CHUNK must be >= 4096 and STRATA_SHM_DEPTH >= 2");
  }
  // STRATA_SHM_STORES is the variable's former name, still read when the new one is unset.
  std::string mode = text("STRATA_SHM_WRITE_MODE");
  const char* name = "STRATA_SHM_WRITE_MODE";
  if (mode.empty() && !text("STRATA_SHM_STORES").empty()) {
    mode = text("STRATA_SHM_STORES");
    name = "STRATA_SHM_STORES";
  }
  if (mode == "ordinary") c.shm_write_mode = ShmWriteMode::ordinary;
  else if (mode == "streaming") c.shm_write_mode = ShmWriteMode::streaming;
  else if (!mode.empty() && mode != "auto") {
    throw Error(ErrorCode::invalid_argument, {.op = "config"},
                std::string(name) + "='" + mode + "' is not auto, ordinary or streaming");
  }
  c.node_id = text("STRATA_NODE_ID");
  c.topo_file = text("STRATA_TOPO_FILE");
  c.flight_records = size_t(number("STRATA_FLIGHT_RECORDER", 128));
  c.dump_dir = text("STRATA_DUMP_DIR");
  c.check = number("STRATA_CHECK", 0) != 0;
  return c;
}

}  // namespace

const Config& config() {
  static const Config c = load();
  return c;
}

}  // namespace strata
