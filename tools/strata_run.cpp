// strata-run: the torchrun-style launcher. Starts N local ranks of a program with RANK,
// WORLD_SIZE, LOCAL_RANK, LOCAL_WORLD_SIZE, MASTER_ADDR, MASTER_PORT, STRATA_STORE_PORT and
// STRATA_JOB_TOKEN set.
// If any rank fails, the others are stopped (SIGTERM, then SIGKILL; with --keep-going they are
// not, and strata-store, not rank 0, serves the job's store); --timeout bounds the whole job.
#include <netinet/in.h>
#include <poll.h>
#include <signal.h>
#include <sys/prctl.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <string>
#include <thread>
#include <vector>

namespace {

constexpr const char* kHelp =
    "usage: strata-run -n N [options] [--] program [args...]\n"
    "\n"
    "Starts N ranks of program on this machine, as torchrun --standalone does: each gets RANK,\n"
    "LOCAL_RANK, WORLD_SIZE, LOCAL_WORLD_SIZE, MASTER_ADDR, MASTER_PORT and STRATA_JOB_TOKEN\n"
    "(a random one unless it is set),\n"
    "which torch.distributed's init_process_group and Communicator::from_env() (C:\n"
    "strataCommInitFromEnv; Python: strata.Communicator.from_env()) read. torch's store takes\n"
    "MASTER_PORT; from_env's takes STRATA_STORE_PORT, a second free port (unless it is set),\n"
    "so one job may use both. When a rank exits with a non-zero status the others get SIGTERM,\n"
    "SIGKILL 3 s later, and strata-run exits with that rank's status (with --keep-going the\n"
    "others run on, as islands that survive losing one need: docs/beyond-one-cluster.md; the\n"
    "job's store is then served by strata-store, started beside the ranks, not by rank 0).\n"
    "\n"
    "  -n, -np N          number of ranks to start (required, >= 1)\n"
    "  --addr ADDRESS     MASTER_ADDR given to the ranks (default 127.0.0.1)\n"
    "  --port PORT        MASTER_PORT (default: a free port of this machine)\n"
    "  --timeout SECONDS  wall-clock limit for the whole job: past it every rank is stopped\n"
    "                     and strata-run exits 124 (default 0: no limit; a rank's own waits\n"
    "                     are bounded by STRATA_TIMEOUT, in seconds, default 300)\n"
    "  --keep-going       a rank's failure stops no other; strata-run exits with the first\n"
    "                     failure's status once every rank has ended\n"
    "  -h, --help         print this and exit\n";

[[noreturn]] void usage(const std::string& why) {
  if (why.empty()) {
    std::fputs(kHelp, stdout);
    std::exit(0);
  }
  std::fprintf(stderr, "strata-run: %s\n\n%s", why.c_str(), kHelp);
  std::exit(2);
}

// The value after flag `flag`, as a number in [lo, hi] (a whole one where `whole`: "-n 2.5" must
// not start 2 ranks); anything else ends the launcher.
double number(int argc, char** argv, int& i, double lo, double hi, bool whole = false) {
  const std::string flag = argv[i];
  if (i + 1 >= argc) usage(flag + " needs a value");
  const char* text = argv[++i];
  char* end = nullptr;
  const double v = std::strtod(text, &end);
  if (end == text || *end != '\0' || !(v >= lo && v <= hi) || (whole && v != std::floor(v)))
    usage(flag + " " + text + ": expected a " + (whole ? "whole " : "") + "number from " +
          std::to_string(long(lo)) + " to " + std::to_string(long(hi)));
  return v;
}

int free_port() {
  int fd = ::socket(AF_INET, SOCK_STREAM, 0);
  sockaddr_in a{};
  a.sin_family = AF_INET;
  a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  socklen_t len = sizeof a;
  if (::bind(fd, reinterpret_cast<sockaddr*>(&a), sizeof a) != 0 ||
      ::getsockname(fd, reinterpret_cast<sockaddr*>(&a), &len) != 0) {
    std::perror("strata-run: cannot find a free port");
    std::exit(1);
  }
  ::close(fd);
  return ntohs(a.sin_port);
}

std::string token() {
  std::ifstream f("/dev/urandom", std::ios::binary);
  unsigned char b[16] = {};
  f.read(reinterpret_cast<char*>(b), sizeof b);
  std::string s;
  char h[3];
  for (unsigned char c : b) {
    std::snprintf(h, sizeof h, "%02x", c);
    s += h;
  }
  return s;
}

std::vector<pid_t> g_children;

// Starts strata-store (found beside this program) on addr:port and waits for it to listen, so
// that the job's store outlives every rank. -1 when there is none beside it (rank 0 then serves,
// as without --keep-going).
pid_t start_store(const std::string& addr, const std::string& port, const std::string& tok) {
  char self[4096] = {};
  const ssize_t len = ::readlink("/proc/self/exe", self, sizeof self - 1);
  std::string path = len > 0 ? std::string(self, size_t(len)) : "";
  path = path.substr(0, path.rfind('/') + 1) + "strata-store";
  if (len <= 0 || ::access(path.c_str(), X_OK) != 0) {
    std::fprintf(stderr,
                 "strata-run: no strata-store beside strata-run; rank 0 serves the job's store, "
                 "so losing rank 0 ends the job\n");
    return -1;
  }
  int fds[2];
  if (::pipe(fds) != 0) {
    std::perror("strata-run: pipe");
    std::exit(1);
  }
  const pid_t pid = ::fork();
  if (pid == 0) {
    ::prctl(PR_SET_PDEATHSIG, SIGTERM);  // never outlives the launcher
    ::dup2(fds[1], 1);
    ::close(fds[0]);
    ::setenv("STRATA_JOB_TOKEN", tok.c_str(), 1);
    ::execl(path.c_str(), path.c_str(), "--addr", addr.c_str(), "--port", port.c_str(), nullptr);
    std::_Exit(127);
  }
  ::close(fds[1]);
  pollfd p{fds[0], POLLIN, 0};
  char line[16] = {};
  const bool ready = ::poll(&p, 1, 10000) == 1 && ::read(fds[0], line, sizeof line - 1) > 0;
  ::close(fds[0]);
  // A store that failed closes the pipe as it exits: say it ended, not that it came up late.
  int status = 0;
  bool ended = false;
  for (int k = 0; !ready && !ended && k < 100; ++k) {
    ended = ::waitpid(pid, &status, WNOHANG) == pid;
    if (!ended) ::usleep(10000);
  }
  if (ended) {
    std::fprintf(
        stderr, "strata-run: %s exited (%s %d) before serving on %s:%s; its message is above\n",
        path.c_str(), WIFEXITED(status) ? "status" : "signal",
        WIFEXITED(status) ? WEXITSTATUS(status) : WTERMSIG(status), addr.c_str(), port.c_str());
    std::exit(1);
  }
  if (!ready) {
    std::fprintf(stderr, "strata-run: %s did not come up on %s:%s within 10 s\n", path.c_str(),
                 addr.c_str(), port.c_str());
    ::kill(pid, SIGKILL);
    std::exit(1);
  }
  return pid;
}

void stop_all(int sig) {
  for (pid_t p : g_children) {
    if (p > 0) ::kill(p, sig);
  }
}

void on_signal(int sig) {
  stop_all(SIGTERM);
  ::signal(sig, SIG_DFL);
  ::raise(sig);
}

}  // namespace

int main(int argc, char** argv) {
  int n = 0, port = 0;
  double timeout = 0;
  bool keep_going = false;
  std::string addr = "127.0.0.1";
  int i = 1;
  for (; i < argc; ++i) {
    std::string a = argv[i];
    if (a == "--") {
      ++i;
      break;
    }
    if (a == "-h" || a == "--help")
      usage("");
    else if (a == "-n" || a == "-np")
      n = int(number(argc, argv, i, 1, 1 << 20, true));
    else if (a == "--port")
      port = int(number(argc, argv, i, 1, 65535, true));
    else if (a == "--addr") {
      if (i + 1 >= argc || !*argv[i + 1]) usage("--addr needs a value");
      addr = argv[++i];
    } else if (a == "--timeout")
      timeout = number(argc, argv, i, 0, 1e9);
    else if (a == "--keep-going")
      keep_going = true;
    else if (a[0] == '-')
      usage("unknown option " + a);
    else
      break;
  }
  if (n < 1) usage("-n N is required");
  if (i >= argc) usage("no program to run");
  if (port == 0) port = free_port();
  // Strata's own store (from_env) on a second port, so that torch.distributed's TCPStore can hold
  // MASTER_PORT in the same job (as torchrun's agent store does under torchrun).
  std::string store_port = std::getenv("STRATA_STORE_PORT") ? std::getenv("STRATA_STORE_PORT") : "";
  while (store_port.empty() || store_port == std::to_string(port))
    store_port = std::to_string(free_port());
  // A given token is kept, so that another job (an island joining, --join) can reach this store.
  const std::string tok =
      std::getenv("STRATA_JOB_TOKEN") ? std::getenv("STRATA_JOB_TOKEN") : token();

  ::signal(SIGINT, on_signal);
  ::signal(SIGTERM, on_signal);
  pid_t store = keep_going ? start_store(addr, store_port, tok) : -1;
  for (int r = 0; r < n; ++r) {
    pid_t pid = ::fork();
    if (pid == 0) {
      ::setenv("RANK", std::to_string(r).c_str(), 1);
      ::setenv("LOCAL_RANK", std::to_string(r).c_str(), 1);
      ::setenv("WORLD_SIZE", std::to_string(n).c_str(), 1);
      ::setenv("LOCAL_WORLD_SIZE", std::to_string(n).c_str(), 1);
      ::setenv("MASTER_ADDR", addr.c_str(), 1);
      ::setenv("MASTER_PORT", std::to_string(port).c_str(), 1);
      ::setenv("STRATA_JOB_TOKEN", tok.c_str(), 1);
      ::setenv("STRATA_STORE_PORT", store_port.c_str(), 1);
      if (store > 0) ::setenv("STRATA_STORE_OUTSIDE", "1", 1);
      ::execvp(argv[i], argv + i);
      std::fprintf(stderr, "strata-run: cannot run %s: %s\n", argv[i], std::strerror(errno));
      std::_Exit(127);
    }
    g_children.push_back(pid);
  }

  const auto start = std::chrono::steady_clock::now();
  int status_out = 0, alive = n;
  bool stopping = false;
  auto stop_time = std::chrono::steady_clock::time_point::max();
  while (alive > 0) {
    int st = 0;
    pid_t pid = ::waitpid(-1, &st, WNOHANG);
    if (pid > 0 && pid == store) {
      std::fprintf(stderr, "strata-run: strata-store (pid %d) ended; the job has no store now\n",
                   int(pid));
      store = -1;
      continue;
    }
    if (pid > 0) {
      int rank = -1;
      for (size_t k = 0; k < g_children.size(); ++k) {
        if (g_children[k] == pid) {
          g_children[k] = -1;
          rank = int(k);
        }
      }
      --alive;
      int code = WIFEXITED(st) ? WEXITSTATUS(st) : 128 + WTERMSIG(st);
      if (code != 0 && keep_going) {
        std::fprintf(stderr, "strata-run: rank %d (pid %d) exited with status %d; the rest go on\n",
                     rank, int(pid), code);
        if (status_out == 0) status_out = code;
      } else if (code != 0 && !stopping && !keep_going) {
        std::fprintf(stderr,
                     "strata-run: rank %d (pid %d) exited with status %d; stopping the rest\n",
                     rank, int(pid), code);
        status_out = code;
        stopping = true;
        stop_all(SIGTERM);
        stop_time = std::chrono::steady_clock::now() + std::chrono::seconds(3);
      }
      continue;
    }
    auto now = std::chrono::steady_clock::now();
    if (timeout > 0 && !stopping && now - start > std::chrono::duration<double>(timeout)) {
      std::fprintf(stderr, "strata-run: job exceeded --timeout %.0f s; stopping it\n", timeout);
      status_out = 124;
      stopping = true;
      stop_all(SIGTERM);
      stop_time = now + std::chrono::seconds(3);
    }
    if (stopping && now > stop_time) stop_all(SIGKILL);
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
  }
  if (store > 0) {
    ::kill(store, SIGTERM);
    ::waitpid(store, nullptr, 0);
  }
  return status_out;
}
