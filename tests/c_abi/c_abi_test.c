/* The C ABI through the installed strata.h and libstrata_c only, compiled as C99: every
 * collective with its values checked element by element, async work, groups, split, unique ids,
 * threads, and the error paths. Run on 2 and 4 ranks (run.sh). Exits non-zero on the first
 * failure. */
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <strata.h>
#include <string.h>
#include <time.h>

static int rank, nranks;

#include "check.h"

#define EXPECT(cond, ...)                                                                \
  do {                                                                                   \
    if (!(cond)) {                                                                       \
      fprintf(stderr, "rank %d: %s:%d: expected %s: ", rank, __FILE__, __LINE__, #cond); \
      fprintf(stderr, __VA_ARGS__);                                                      \
      fprintf(stderr, "\n");                                                             \
      exit(1);                                                                           \
    }                                                                                    \
  } while (0)

/* A failing call: the code and a message containing `needle`. */
static void expect_error(strataResult_t got, strataResult_t want, const char* needle, int line) {
  if (got != want || strstr(strataGetLastError(), needle) == NULL) {
    fprintf(stderr, "rank %d: line %d: wanted %s containing '%s', got %s: '%s'\n", rank, line,
            strataGetErrorString(want), needle, strataGetErrorString(got), strataGetLastError());
    exit(1);
  }
}
#define EXPECT_ERROR(call, want, needle) expect_error((call), (want), (needle), __LINE__)

#define N 1000

static void collectives(strataComm_t comm) {
  int r, n, i, j;
  static float in[N * 8], out[N * 8];
  static double d[N];
  static int64_t big[N];
  strataWork_t work;
  int done = 0;
  CHECK(strataCommUserRank(comm, &r));
  CHECK(strataCommCount(comm, &n));

  /* all-reduce, out of place and async */
  for (i = 0; i < N; ++i) in[i] = (float)((r + 1) * (i % 7));
  CHECK(strataAllReduce(in, out, N, strataFloat32, strataSum, comm, &work));
  CHECK(strataWorkWait(work));
  CHECK(strataWorkTest(work, &done));
  EXPECT(done == 1, "a waited work is done");
  CHECK(strataWorkFree(work));
  for (i = 0; i < N; ++i)
    EXPECT(out[i] == (float)(n * (n + 1) / 2 * (i % 7)), "sum[%d]=%g", i, out[i]);
  /* in place, blocking, max over doubles; bxor over int64 */
  for (i = 0; i < N; ++i) d[i] = (double)((r * 31 + i) % 11);
  CHECK(strataAllReduce(d, d, N, strataFloat64, strataMax, comm, NULL));
  for (i = 0; i < N; ++i) {
    double want = 0;
    for (j = 0; j < n; ++j)
      want = (double)((j * 31 + i) % 11) > want ? (double)((j * 31 + i) % 11) : want;
    EXPECT(d[i] == want, "max[%d]=%g want %g", i, d[i], want);
  }
  for (i = 0; i < N; ++i) big[i] = (int64_t)1 << (r % 63);
  CHECK(strataAllReduce(big, big, N, strataInt64, strataBxor, comm, NULL));
  {
    int64_t want = 0;
    for (j = 0; j < n; ++j) want ^= (int64_t)1 << (j % 63);
    for (i = 0; i < N; ++i) EXPECT(big[i] == want, "bxor[%d]", i);
  }

  /* broadcast from the last rank; non-roots pass no send buffer */
  for (i = 0; i < N; ++i) in[i] = r == n - 1 ? (float)i : -1.0f;
  CHECK(strataBroadcast(r == n - 1 ? in : NULL, in, N, strataFloat, n - 1, comm, NULL));
  for (i = 0; i < N; ++i) EXPECT(in[i] == (float)i, "bcast[%d]=%g", i, in[i]);

  /* reduce (avg) to rank 0 */
  for (i = 0; i < N; ++i) in[i] = (float)(2 * r * i);
  CHECK(strataReduce(in, r == 0 ? out : NULL, N, strataFloat, strataAvg, 0, comm, NULL));
  if (r == 0)
    for (i = 0; i < N; ++i) EXPECT(out[i] == (float)((n - 1) * i), "avg[%d]=%g", i, out[i]);

  /* all-gather and reduce-scatter */
  for (i = 0; i < N; ++i) in[i] = (float)(r * N + i);
  CHECK(strataAllGather(in, out, N, strataFloat, comm, NULL));
  for (i = 0; i < N * n; ++i) EXPECT(out[i] == (float)i, "allgather[%d]=%g", i, out[i]);
  for (i = 0; i < N * n; ++i) in[i] = (float)(i + r);
  CHECK(strataReduceScatter(in, out, N, strataFloat, strataSum, comm, NULL));
  for (i = 0; i < N; ++i)
    EXPECT(out[i] == (float)(n * (r * N + i) + n * (n - 1) / 2), "reducescatter[%d]=%g", i, out[i]);

  /* all-to-all: block j of rank r holds 100 * r + j */
  for (j = 0; j < n; ++j)
    for (i = 0; i < N; ++i) in[j * N + i] = (float)(100 * r + j);
  CHECK(strataAlltoAll(in, out, N, strataFloat, comm, NULL));
  for (j = 0; j < n; ++j)
    for (i = 0; i < N; ++i) EXPECT(out[j * N + i] == (float)(100 * j + r), "alltoall[%d,%d]", j, i);

  /* all-to-allv: rank r sends j + 1 elements to rank j */
  {
    size_t sc[8], sd[8], rc[8], rd[8], at = 0, from = 0;
    for (j = 0; j < n; ++j) {
      sc[j] = (size_t)j + 1, sd[j] = at, at += sc[j];
      rc[j] = (size_t)r + 1, rd[j] = from, from += rc[j];
    }
    for (i = 0; i < (int)at; ++i) in[i] = (float)(1000 * r + i);
    CHECK(strataAlltoAllv(in, sc, sd, out, rc, rd, strataFloat, comm, NULL));
    for (j = 0; j < n; ++j) {
      size_t sender_at = 0; /* where rank j's block for us starts in its send buffer */
      int k;
      for (k = 0; k < r; ++k) sender_at += (size_t)k + 1;
      for (i = 0; i < r + 1; ++i)
        EXPECT(out[rd[j] + i] == (float)(1000 * j + sender_at + i), "alltoallv from %d [%d]", j, i);
    }
  }

  /* gather and scatter at rank 1 % n */
  for (i = 0; i < N; ++i) in[i] = (float)(r + i);
  CHECK(strataGather(in, r == 1 % n ? out : NULL, N, strataFloat, 1 % n, comm, NULL));
  if (r == 1 % n)
    for (j = 0; j < n; ++j)
      for (i = 0; i < N; ++i) EXPECT(out[j * N + i] == (float)(j + i), "gather[%d,%d]", j, i);
  for (i = 0; i < N * n; ++i) in[i] = (float)(3 * i);
  CHECK(strataScatter(r == 1 % n ? in : NULL, out, N, strataFloat, 1 % n, comm, NULL));
  for (i = 0; i < N; ++i) EXPECT(out[i] == (float)(3 * (r * N + i)), "scatter[%d]", i);

  CHECK(strataBarrier(comm, NULL));
}

/* A ring exchange in one group: every send and recv posted before any completes. */
static void ring(strataComm_t comm) {
  int r, n, i;
  int32_t send_buf[N], recv_buf[N];
  strataWork_t recv_work;
  CHECK(strataCommUserRank(comm, &r));
  CHECK(strataCommCount(comm, &n));
  for (i = 0; i < N; ++i) send_buf[i] = r * N + i;
  CHECK(strataGroupStart());
  CHECK(strataSend(send_buf, N, strataInt32, (r + 1) % n, comm, NULL));
  CHECK(strataRecv(recv_buf, N, strataInt32, (r + n - 1) % n, comm, &recv_work));
  EXPECT_ERROR(strataWorkWait(recv_work), strataInvalidUsage, "group is still open");
  CHECK(strataGroupEnd());
  CHECK(strataWorkWait(recv_work));
  CHECK(strataWorkFree(recv_work));
  for (i = 0; i < N; ++i) EXPECT(recv_buf[i] == ((r + n - 1) % n) * N + i, "ring[%d]", i);
}

static void errors(strataComm_t comm) {
  float v[4] = {0};
  EXPECT_ERROR(strataAllReduce(v, v, 4, (strataDataType_t)17, strataSum, comm, NULL),
               strataInvalidArgument, "unknown datatype 17");
  EXPECT_ERROR(strataAllReduce(v, v, 4, strataFloat, (strataRedOp_t)42, comm, NULL),
               strataInvalidArgument, "unknown reduction op 42");
  EXPECT_ERROR(strataAllReduce(v, v, 4, strataFloat, strataBxor, comm, NULL), strataInvalidArgument,
               "bxor is not supported for f32");
  EXPECT_ERROR(strataAllReduce(v, v, 4, strataFloat, strataSum, NULL, NULL), strataInvalidUsage,
               "comm is NULL");
  EXPECT_ERROR(strataBroadcast(v, v, 4, strataFloat, 99, comm, NULL), strataInvalidArgument,
               "root 99");
  /* Point to point converts its arguments like the collectives: a bad datatype is an error
   * code, not an exception out of C (which ended the process); C has no any-source receive. */
  EXPECT_ERROR(strataSend(v, 4, (strataDataType_t)17, 0, comm, NULL), strataInvalidArgument,
               "unknown datatype 17");
  EXPECT_ERROR(strataRecv(v, 4, (strataDataType_t)17, 0, comm, NULL), strataInvalidArgument,
               "unknown datatype 17");
  EXPECT_ERROR(strataRecv(v, 4, strataFloat, -1, comm, NULL), strataInvalidArgument,
               "peer -1 is out of range");
  /* nranks * count beyond size_t: refused, not wrapped to a small all-to-all */
  EXPECT_ERROR(strataAlltoAll(v, v, (size_t)-1 / 2 + 1, strataFloat, comm, NULL),
               strataInvalidArgument, "overflows size_t");
  EXPECT_ERROR(strataGroupEnd(), strataInvalidUsage, "without strataGroupStart");
  EXPECT(strstr(strataGetLastError(), "without") != NULL, "last error kept");
  EXPECT(strcmp(strataGetErrorString(strataRemoteError),
                "remote process exited or there was a network error") == 0,
         "error string");
}

/* A device handle of the group: host memory given to it is refused by name, whatever the build
 * and machine (no device path, no usable GPU, or host memory marked as device memory), and the
 * group lives on after the handle is freed. */
static void device(strataComm_t comm) {
  strataComm_t dev;
  float v[4] = {1, 1, 1, 1};
  CHECK(strataCommOnStream(comm, NULL, &dev));
  EXPECT_ERROR(strataAllReduce(v, v, 4, strataFloat, strataSum, dev, NULL), strataInvalidArgument,
               "CUDA device memory");
  EXPECT_ERROR(strataCommOnStream(comm, NULL, NULL), strataInvalidArgument, "device_comm is NULL");
  /* A device handle's split is a device handle: host memory is refused there too (it was taken
   * as host memory, so a CUDA pointer would have been read as one). */
  {
    strataComm_t sub;
    CHECK(strataCommSplit(dev, 0, rank, &sub));
    EXPECT_ERROR(strataAllReduce(v, v, 4, strataFloat, strataSum, sub, NULL), strataInvalidArgument,
                 "CUDA device memory");
    CHECK(strataCommDestroy(sub));
  }
  CHECK(strataCommDestroy(dev));
  CHECK(strataAllReduce(v, v, 4, strataFloat, strataSum, comm, NULL));
  EXPECT(v[0] == (float)nranks, "after the device handle: %g", v[0]);
}

/* Symmetric memory: an all-gather and an all-to-all from it (peers read it in place), checked
 * element by element; freeing it twice and a size that differs are refused. */
static void symmetric(strataComm_t comm) {
  static float out[N * 8];
  float* sym = NULL;
  void* other = NULL;
  int i, j;
  CHECK(strataMemAllocSymmetric(comm, sizeof(float) * N * (size_t)nranks, (void**)&sym));
  for (i = 0; i < N; ++i) EXPECT(sym[i] == 0.0f, "zeroed [%d]", i);
  for (i = 0; i < N * nranks; ++i) sym[i] = (float)(10000 * rank + i);
  CHECK(strataAllGather(sym, out, N, strataFloat, comm, NULL));
  for (j = 0; j < nranks; ++j)
    for (i = 0; i < N; ++i) EXPECT(out[j * N + i] == (float)(10000 * j + i), "gather[%d,%d]", j, i);
  CHECK(strataAlltoAll(sym, out, N, strataFloat, comm, NULL));
  for (j = 0; j < nranks; ++j)
    for (i = 0; i < N; ++i)
      EXPECT(out[j * N + i] == (float)(10000 * j + rank * N + i), "alltoall[%d,%d]", j, i);
  CHECK(strataMemFreeSymmetric(sym));
  CHECK(strataMemFreeSymmetric(NULL));
  EXPECT_ERROR(strataMemFreeSymmetric(sym), strataInvalidArgument, "freed already");
  EXPECT_ERROR(strataMemAllocSymmetric(comm, 64 + (size_t)rank, &other), strataInvalidArgument,
               "every rank allocates the same");
  EXPECT(other == NULL, "a refused allocation leaves ptr alone");
}

/* Threads: a thread that did not create the communicator is refused its collectives, naming
 * both threads; handed the issuing on every rank, it runs them. */
static void* other_thread(void* arg) {
  strataComm_t comm = (strataComm_t)arg;
  float v[4] = {1, 1, 1, 1};
  int i;
  EXPECT_ERROR(strataAllReduce(v, v, 4, strataFloat, strataSum, comm, NULL), strataInvalidArgument,
               "one thread issues a communicator's collectives");
  CHECK(strataCommIssueFromThisThread(comm));
  CHECK(strataAllReduce(v, v, 4, strataFloat, strataSum, comm, NULL));
  for (i = 0; i < 4; ++i) EXPECT(v[i] == (float)nranks, "thread's all-reduce: %g", v[i]);
  return NULL;
}

static void threads(strataComm_t comm) {
  pthread_t t;
  EXPECT(pthread_create(&t, NULL, other_thread, comm) == 0, "pthread_create");
  EXPECT(pthread_join(t, NULL) == 0, "pthread_join");
  CHECK(strataCommIssueFromThisThread(comm)); /* back to this thread, on every rank */
  CHECK(strataBarrier(comm, NULL));
}

int main(void) {
  strataComm_t world, half, again, none;
  strataUniqueId id;
  int version = 0;
  CHECK(strataGetVersion(&version));
  EXPECT(version == STRATA_VERSION_CODE, "version %d", version);
  CHECK(strataCommInitFromEnv(&world));
  CHECK(strataCommUserRank(world, &rank));
  CHECK(strataCommCount(world, &nranks));

  collectives(world);
  ring(world);
  errors(world);
  device(world);
  symmetric(world);
  threads(world);

  /* split: even and odd ranks, the last rank opting out */
  CHECK(strataCommSplit(world, rank == nranks - 1 && nranks > 2 ? STRATA_SPLIT_NOCOLOR : rank % 2,
                        -rank, &half));
  if (rank == nranks - 1 && nranks > 2) {
    EXPECT(half == NULL, "NOCOLOR gives NULL");
  } else {
    int hr, hn, want_n = 0, want_r = 0, j;
    for (j = 0; j < nranks; ++j) { /* same color, not opted out; ordered by key = -rank */
      if (j % 2 != rank % 2 || (j == nranks - 1 && nranks > 2)) continue;
      ++want_n;
      if (j > rank) ++want_r;
    }
    CHECK(strataCommUserRank(half, &hr));
    CHECK(strataCommCount(half, &hn));
    EXPECT(hn == want_n && hr == want_r, "split: rank %d of %d, want %d of %d", hr, hn, want_r,
           want_n);
    collectives(half);
    CHECK(strataCommDestroy(half));
  }

  /* a communicator from a unique id, carried by the world's broadcast */
  if (rank == 0) CHECK(strataGetUniqueId(&id));
  CHECK(strataBroadcast(&id, &id, sizeof id, strataChar, 0, world, NULL));
  CHECK(strataCommInitRank(&again, nranks, id, nranks - 1 - rank)); /* reversed ranks */
  {
    int ar;
    CHECK(strataCommUserRank(again, &ar));
    EXPECT(ar == nranks - 1 - rank, "rank from id %d", ar);
  }
  collectives(again);
  memset(&id, 0, sizeof id);
  EXPECT_ERROR(strataCommInitRank(&none, nranks, id, 0), strataInvalidArgument,
               "not made by strataGetUniqueId");

  /* abort: world rank 0 aborts `again`; the others learn it from strataCommCheckHealth without an
   * operation (within 10 s), and their next operation fails naming it too */
  CHECK(strataCommCheckHealth(again)); /* healthy: nothing to report */
  CHECK(strataBarrier(world, NULL));
  if (rank == 0) {
    CHECK(strataCommAbort(again));
  } else {
    float v[4] = {0};
    char culprit[64]; /* world rank 0 is rank nranks - 1 of `again` */
    const time_t give_up = time(NULL) + 10;
    strataResult_t r;
    while ((r = strataCommCheckHealth(again)) == strataSuccess && time(NULL) < give_up) {
    }
    snprintf(culprit, sizeof culprit, "rank %d aborted", nranks - 1);
    EXPECT(r == strataRemoteError || r == strataAborted, "check health after abort: %s",
           strataGetErrorString(r));
    EXPECT(strstr(strataGetLastError(), culprit) != NULL, "check health names %s: %s", culprit,
           strataGetLastError());
    r = strataAllReduce(v, v, 4, strataFloat, strataSum, again, NULL);
    EXPECT(r == strataRemoteError || r == strataAborted, "after abort: %s",
           strataGetErrorString(r));
    EXPECT(strstr(strataGetLastError(), culprit) != NULL, "names %s: %s", culprit,
           strataGetLastError());
    CHECK(strataCommDestroy(again));
  }
  CHECK(strataBarrier(world, NULL));
  CHECK(strataCommDestroy(world));
  printf("rank %d of %d: c_abi ok\n", rank, nranks);
  return 0;
}
