// Every STRATA_* environment variable is read here, once; the README has the table.
#pragma once

#include <chrono>
#include <string>

namespace strata {

/// STRATA_SHM_WRITE_MODE: which CPU stores stage large shared-memory chunks, or none: peers copy
/// the input out of this process (single_copy; shm/write_mode.hpp).
enum class ShmWriteMode { learn, ordinary, streaming, single_copy };

struct Config {
  std::chrono::milliseconds timeout{300000};     ///< STRATA_TIMEOUT (seconds): deadline of every op
  std::chrono::microseconds spin{20000};         ///< STRATA_SPIN_US: see spin_policy.hpp
  std::chrono::microseconds progress_delay{50};  ///< STRATA_PROGRESS_DELAY_US (see engine.hpp)
  std::string algo;                              ///< STRATA_ALGO: forced algorithms (see docs)
  std::string store_addr;      ///< STRATA_STORE_ADDR: address rank 0's store binds
  int store_port = -1;         ///< STRATA_STORE_PORT: from_env's store port (-1: unset)
  bool store_outside = false;  ///< STRATA_STORE_OUTSIDE=1: strata-store serves it, not rank 0
  bool shm = true;             ///< STRATA_SHM=0 disables the shared-memory path
  size_t shm_chunk_bytes = 256 * 1024;  ///< STRATA_SHM_CHUNK: bytes per staging buffer
  int shm_depth = 4;                    ///< STRATA_SHM_DEPTH: staging buffers per rank
  ShmWriteMode shm_write_mode = ShmWriteMode::learn;  ///< STRATA_SHM_WRITE_MODE (see above)
  std::string node_id;          ///< STRATA_NODE_ID: overrides hostname + boot id
  std::string topo_file;        ///< STRATA_TOPO_FILE: read the node from this file, not the machine
  size_t flight_records = 128;  ///< STRATA_FLIGHT_RECORDER: operations kept per communicator
  bool check = false;           ///< STRATA_CHECK=1: collectives agree on a fingerprint first
  std::string dump_dir;         ///< STRATA_DUMP_DIR: where flight records go (default: stderr)
  std::string device_path;      ///< STRATA_DEVICE_PATH: nccl or staged forced (docs/device.md)
  size_t stage_chunk_bytes = 4 << 20;  ///< STRATA_STAGE_CHUNK: bytes per staged device chunk
};

/// The process's configuration (parsed on first call; malformed values throw strata::Error).
const Config& config();

}  // namespace strata
