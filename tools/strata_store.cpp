// strata-store: a job's store served by a process of its own, so that the job outlives any of
// its ranks (rank 0 serves it otherwise). strata-run --keep-going starts one; torchft's
// lighthouse plays the same part. The job token comes from the environment, never the command
// line, which other users can read.
#include <signal.h>

#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>

#include "strata/error.hpp"
#include "strata/store.hpp"

namespace {

constexpr const char* kHelp =
    "usage: strata-store [--addr ADDRESS] [--port PORT]\n"
    "\n"
    "Serves the store of one job until SIGTERM or SIGINT, and prints the port it listens on\n"
    "(one line on stdout) once it does. The job's ranks reach it with MASTER_ADDR and\n"
    "STRATA_STORE_PORT set to its address and port, STRATA_JOB_TOKEN to the token below, and\n"
    "STRATA_STORE_OUTSIDE=1, so that rank 0 does not serve one itself\n"
    "(docs/beyond-one-cluster.md, \"When an island dies\").\n"
    "\n"
    "  --addr ADDRESS   address to listen on (default 127.0.0.1)\n"
    "  --port PORT      port to listen on (default 0: any free one)\n"
    "  STRATA_JOB_TOKEN (environment, required): the job's secret every client presents\n";

[[noreturn]] void usage(const std::string& why) {
  std::fprintf(why.empty() ? stdout : stderr, "%s%s%s",
               why.empty() ? "" : "strata-store: ", why.empty() ? "" : (why + "\n\n").c_str(),
               kHelp);
  std::exit(why.empty() ? 0 : 2);
}

}  // namespace

int main(int argc, char** argv) {
  strata::TcpStoreOptions o;
  for (int i = 1; i < argc; ++i) {
    const std::string a = argv[i];
    if (a == "-h" || a == "--help") usage("");
    if ((a == "--addr" || a == "--port") && i + 1 >= argc) usage(a + " needs a value");
    if (a == "--addr") {
      o.host = argv[++i];
    } else if (a == "--port") {
      char* end = nullptr;
      const long p = std::strtol(argv[++i], &end, 10);
      if (*end != '\0' || end == argv[i] || p < 0 || p > 65535)
        usage(std::string("--port ") + argv[i] + ": expected a port from 0 to 65535");
      o.port = uint16_t(p);
    } else {
      usage("unknown option " + a);
    }
  }
  const char* token = std::getenv("STRATA_JOB_TOKEN");
  if (!token || !*token) usage("STRATA_JOB_TOKEN is not set: the job's ranks present it");
  o.token = token;
  // Blocked before the server's thread starts, so that only sigwait below takes them.
  sigset_t stop;
  sigemptyset(&stop);
  sigaddset(&stop, SIGTERM);
  sigaddset(&stop, SIGINT);
  pthread_sigmask(SIG_BLOCK, &stop, nullptr);
  try {
    strata::TcpStoreServer server(o);
    std::printf("%u\n", unsigned(server.port()));
    std::fflush(stdout);
    int sig = 0;
    sigwait(&stop, &sig);
  } catch (const strata::Error& e) {
    std::fprintf(stderr, "strata-store: %s\n", e.what());
    return 1;
  }
  return 0;
}
