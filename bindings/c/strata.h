/* Strata's C ABI: every collective and point-to-point operation of a Strata communicator, callable
 * from C99 (and any language with a C FFI). Written in NCCL's conventions so that a NCCL user reads
 * it at once: opaque handles, a result code from every call, dtype and op enums numbered as NCCL
 * numbers them, arguments in NCCL's order. Where NCCL takes a CUDA stream, Strata takes a
 * `strataWork_t*`: NULL makes the call blocking, otherwise it receives a handle to wait on.
 *
 * Buffers are host memory, or CUDA device memory on a communicator from strataCommOnStream, whose
 * calls are ordered on a CUDA stream as NCCL's are. The caller keeps them alive and untouched
 * until the operation has completed (strataWorkWait / strataWorkTest returned done). Errors never
 * escape as C++ exceptions: every call returns a strataResult_t, and strataGetLastError() gives
 * this thread's last message, which names the rank, group, operation, sequence number and peer.
 *
 * Link with -lstrata_c. Only the strata* functions below are exported, under the symbol version
 * STRATA_0. docs/bindings.md has the full guide. */
#ifndef STRATA_H_
#define STRATA_H_

#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

#define STRATA_MAJOR 0
#define STRATA_MINOR 1
#define STRATA_PATCH 0
/* As NCCL_VERSION_CODE: major * 10000 + minor * 100 + patch. */
#define STRATA_VERSION_CODE (STRATA_MAJOR * 10000 + STRATA_MINOR * 100 + STRATA_PATCH)

/* A communicator: a group of ranks. */
typedef struct strataComm* strataComm_t;
/* The completion handle of one asynchronous operation; free it with strataWorkFree. */
typedef struct strataWork* strataWork_t;

/* Result of every call. The shared values are NCCL's (ncclSuccess ... ncclInProgress). */
typedef enum {
  strataSuccess = 0,
  strataSystemError = 2,     /* the transport (UCX, sockets, shared memory) failed */
  strataInternalError = 3,   /* a bug in Strata */
  strataInvalidArgument = 4, /* rejected before any byte moved */
  strataInvalidUsage = 5,    /* a call out of place: a NULL handle, waiting inside a group */
  strataRemoteError = 6,     /* a peer died, aborted or closed its connection */
  strataInProgress = 7,      /* not used by this version: every init call completes */
  strataTimeout = 8,         /* a deadline passed (STRATA_TIMEOUT, 300 s by default) */
  strataAborted = 9,         /* strataCommAbort ended the operation */
  strataNumResults = 10
} strataResult_t;

/* Element types, numbered as ncclDataType_t; Strata's additions start at 32. */
typedef enum {
  strataInt8 = 0,
  strataChar = 0,
  strataUint8 = 1,
  strataInt32 = 2,
  strataInt = 2,
  strataUint32 = 3,
  strataInt64 = 4,
  strataUint64 = 5,
  strataFloat16 = 6,
  strataHalf = 6,
  strataFloat32 = 7,
  strataFloat = 7,
  strataFloat64 = 8,
  strataDouble = 8,
  strataBfloat16 = 9,
  strataInt16 = 32,
  strataBool = 33,      /* one byte, 0 or 1 */
  strataComplex64 = 34, /* float real, float imaginary */
  strataComplex128 = 35 /* double real, double imaginary */
} strataDataType_t;

/* Reduction operators, numbered as ncclRedOp_t; the bitwise ones (integers and strataBool only)
 * are Strata's. strataAvg divides the sum by the group size (integers truncate). */
typedef enum {
  strataSum = 0,
  strataProd = 1,
  strataMax = 2,
  strataMin = 3,
  strataAvg = 4,
  strataBand = 5,
  strataBor = 6,
  strataBxor = 7
} strataRedOp_t;

/* Passed as the color to strataCommSplit by a rank that takes part but joins no new group. */
#define STRATA_SPLIT_NOCOLOR -1

/* What strataGetUniqueId hands to every rank (out of band, e.g. MPI_Bcast or a file). */
#define STRATA_UNIQUE_ID_BYTES 128
typedef struct {
  char internal[STRATA_UNIQUE_ID_BYTES];
} strataUniqueId;

/* ---- errors and version ---- */

/* A constant description of a result code. */
const char* strataGetErrorString(strataResult_t result);
/* The message of this thread's last failed call ("" if none), valid until its next failing call. */
const char* strataGetLastError(void);
/* STRATA_VERSION_CODE of the library actually loaded. */
strataResult_t strataGetVersion(int* version);

/* ---- communicators ---- */

/* The world communicator of a job started by mpirun, srun, torchrun or strata-run. Collective. */
strataResult_t strataCommInitFromEnv(strataComm_t* comm);
/* Called once (on one rank): creates the meeting point of a new communicator. The calling process
 * serves it until the communicator it joins with this id is destroyed. */
strataResult_t strataGetUniqueId(strataUniqueId* uniqueId);
/* Collective over `nranks` processes holding the same id: creates their communicator. */
strataResult_t strataCommInitRank(strataComm_t* comm, int nranks, strataUniqueId commId, int rank);
/* Collective over `comm`: ranks passing the same color form *newcomm, ordered by (key, rank).
 * A rank passing STRATA_SPLIT_NOCOLOR (any negative color) gets NULL. The new communicator
 * keeps `comm`'s deadline, and a device handle's (strataCommOnStream) buffers and stream. */
strataResult_t strataCommSplit(strataComm_t comm, int color, int key, strataComm_t* newcomm);
/* A CUDA stream: cudaStream_t itself (the same type), without CUDA's headers. */
typedef struct CUstream_st* strataStream_t;
/* A second handle to `comm`'s group whose calls take CUDA device buffers and are ordered on
 * `stream` (NULL: the legacy default stream), by NCCL or staged through host memory
 * (docs/device.md). On it a NULL `work` returns once the call is on the stream, as NCCL's calls
 * do; a handle completes when the GPU has run it. Free it with strataCommDestroy: the group
 * lives on in `comm`. Device memory on a build or rank without CUDA is strataInvalidArgument. */
strataResult_t strataCommOnStream(strataComm_t comm, strataStream_t stream,
                                  strataComm_t* device_comm);
/* Frees this handle. Freeing the group's last handle (those of strataCommOnStream and
 * strataCommSplit are separate groups' or handles of their own) ends the group: operations
 * still pending fail with strataAborted, unlike ncclCommDestroy, which waits for them. Wait for
 * them first (strataWorkWait, or the stream's synchronisation for a device handle). */
strataResult_t strataCommDestroy(strataComm_t comm);
/* Ends the group at once: pending and later operations fail with strataAborted here and with
 * strataRemoteError naming this rank on the others. Then frees it. */
strataResult_t strataCommAbort(strataComm_t comm);
/* strataSuccess, or the failure the group has met (strataRemoteError or strataAborted, the last
 * error naming the rank that died or aborted): found by a look that costs no message (a peer's
 * process on this machine gone, a failure notice, a broken connection), never waiting for other
 * ranks. For a caller between operations that wants to know early. Any thread. */
strataResult_t strataCommCheckHealth(strataComm_t comm);
/* Collectives on a communicator are issued by one thread, the one that created it, so that every
 * rank issues them in one order; another thread's fail with strataInvalidArgument naming both
 * threads. This hands the issuing to the calling thread: call it on every rank at the same point,
 * with nothing being issued meanwhile. Sends, receives and waits may come from any thread. */
strataResult_t strataCommIssueFromThisThread(strataComm_t comm);
/* Collective: `bytes` of zeroed host memory at *ptr (every rank passes the same size), mapped by
 * the communicator's other ranks when they share this node: on it, strataAllGather,
 * strataAlltoAll and strataAlltoAllv read an input lying in it from its owner's memory, one copy
 * where other memory takes two (as ncclMemAlloc with a window registered); elsewhere it is
 * memory like any other. Free it on every rank after its last call. */
strataResult_t strataMemAllocSymmetric(strataComm_t comm, size_t bytes, void** ptr);
/* Frees what strataMemAllocSymmetric returned; NULL is allowed, another pointer refused. */
strataResult_t strataMemFreeSymmetric(void* ptr);
/* The number of ranks in `comm`, and this process's rank in it (0 to count - 1). */
strataResult_t strataCommCount(const strataComm_t comm, int* count);
strataResult_t strataCommUserRank(const strataComm_t comm, int* rank);

/* ---- collectives (counts in elements; `work` NULL = blocking) ---- */

/* Every rank receives the reduction of every rank's sendbuff (in place: sendbuff == recvbuff). */
strataResult_t strataAllReduce(const void* sendbuff, void* recvbuff, size_t count,
                               strataDataType_t datatype, strataRedOp_t op, strataComm_t comm,
                               strataWork_t* work);
/* sendbuff is read on root only; every rank receives into recvbuff (may equal sendbuff). */
strataResult_t strataBroadcast(const void* sendbuff, void* recvbuff, size_t count,
                               strataDataType_t datatype, int root, strataComm_t comm,
                               strataWork_t* work);
/* As strataAllReduce, the result on root only: recvbuff is used on root and ignored elsewhere. */
strataResult_t strataReduce(const void* sendbuff, void* recvbuff, size_t count,
                            strataDataType_t datatype, strataRedOp_t op, int root,
                            strataComm_t comm, strataWork_t* work);
/* recvbuff holds nranks * sendcount elements. */
strataResult_t strataAllGather(const void* sendbuff, void* recvbuff, size_t sendcount,
                               strataDataType_t datatype, strataComm_t comm, strataWork_t* work);
/* sendbuff holds nranks * recvcount elements. */
strataResult_t strataReduceScatter(const void* sendbuff, void* recvbuff, size_t recvcount,
                                   strataDataType_t datatype, strataRedOp_t op, strataComm_t comm,
                                   strataWork_t* work);
/* `count` elements to and from every peer (buffers of nranks * count), as ncclAlltoAll. */
strataResult_t strataAlltoAll(const void* sendbuff, void* recvbuff, size_t count,
                              strataDataType_t datatype, strataComm_t comm, strataWork_t* work);
/* Per-peer counts and displacements (arrays of nranks, in elements). */
strataResult_t strataAlltoAllv(const void* sendbuff, const size_t* sendcounts,
                               const size_t* sdispls, void* recvbuff, const size_t* recvcounts,
                               const size_t* rdispls, strataDataType_t datatype, strataComm_t comm,
                               strataWork_t* work);
/* root's recvbuff holds nranks * sendcount elements in rank order. */
strataResult_t strataGather(const void* sendbuff, void* recvbuff, size_t sendcount,
                            strataDataType_t datatype, int root, strataComm_t comm,
                            strataWork_t* work);
/* root's sendbuff holds nranks * recvcount elements; block r goes to rank r. */
strataResult_t strataScatter(const void* sendbuff, void* recvbuff, size_t recvcount,
                             strataDataType_t datatype, int root, strataComm_t comm,
                             strataWork_t* work);
/* Completes on a rank once every rank of `comm` has entered it. */
strataResult_t strataBarrier(strataComm_t comm, strataWork_t* work);

/* ---- point to point (messages between one pair match in issue order) ---- */

/* Sends count elements to `peer`, a rank of `comm`, matched by its strataRecv from this rank. */
strataResult_t strataSend(const void* sendbuff, size_t count, strataDataType_t datatype, int peer,
                          strataComm_t comm, strataWork_t* work);
/* `peer` is a rank of `comm` (no wildcard: a negative peer is strataInvalidArgument). */
strataResult_t strataRecv(void* recvbuff, size_t count, strataDataType_t datatype, int peer,
                          strataComm_t comm, strataWork_t* work);

/* ---- groups: calls between Start and End are issued together at End ----
 * Inside a group nothing blocks: a call with a NULL work pointer completes by strataGroupEnd,
 * which waits for those; a call given a work pointer gets a handle that is valid at once and
 * becomes waitable after strataGroupEnd. Groups nest (only the outermost End issues). The
 * sends and receives of one device handle (strataCommOnStream) go together, as NCCL's grouped
 * calls: on NCCL inside one ncclGroupStart/End, so a ring of sends before receives cannot
 * deadlock. */
strataResult_t strataGroupStart(void);
strataResult_t strataGroupEnd(void);

/* ---- completion ---- */

/* Waits until done; the operation's own error if it failed. It waits while the communicator's
 * operations complete; if none completes within the communicator's deadline (plus up to 5 s),
 * the communicator is aborted and this returns strataTimeout. */
strataResult_t strataWorkWait(strataWork_t work);
/* *done = 1 when complete, 0 otherwise. Never waits for a rank that has not issued the
 * collective yet; may run on this thread one that every rank has issued (strata::Work::test). */
strataResult_t strataWorkTest(strataWork_t work, int* done);
/* Releases the handle (the operation itself continues; its buffers must stay valid until done). */
strataResult_t strataWorkFree(strataWork_t work);

#ifdef __cplusplus
}
#endif

#endif /* STRATA_H_ */
