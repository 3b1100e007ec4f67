/* The C ABI on CUDA memory (docs/bindings.md, docs/device.md): a strataCommOnStream handle on the
 * caller's non-blocking stream; an all-reduce enqueued with a NULL work between two copies on
 * that stream (read back with no host synchronise between the call and the copy), an all-gather
 * whose work is waited on, a ring of sends and receives in one strataGroupStart/End; values
 * against the host. One rank per GPU goes by NCCL, ranks sharing
 * one are staged. Exits 0 with "no CUDA device" where there is none. */
#include <cuda_runtime_api.h>
#include <stdio.h>
#include <stdlib.h>
#include <strata.h>

static int rank, nranks;

#include "check.h"

#define CUDA(call)                                                                 \
  do {                                                                             \
    cudaError_t e_ = (call);                                                       \
    if (e_ != cudaSuccess) {                                                       \
      fprintf(stderr, "rank %d: %s:%d: %s: %s\n", rank, __FILE__, __LINE__, #call, \
              cudaGetErrorString(e_));                                             \
      exit(1);                                                                     \
    }                                                                              \
  } while (0)

#define N 4099

int main(void) {
  static float in[N], out[N * 8];
  const char* local = getenv("LOCAL_RANK");
  strataComm_t world, dev;
  strataWork_t work;
  cudaStream_t stream;
  float *d, *gathered;
  int devices = 0, i, r;
  if (cudaGetDeviceCount(&devices) != cudaSuccess || devices == 0) {
    printf("SKIPPED: no CUDA device\n");
    return 0;
  }
  CUDA(cudaSetDevice((local ? atoi(local) : 0) % devices));
  CHECK(strataCommInitFromEnv(&world));
  CHECK(strataCommUserRank(world, &rank));
  CHECK(strataCommCount(world, &nranks));
  if (nranks > 8) return 0; /* out holds 8 blocks */
  CUDA(cudaStreamCreateWithFlags(&stream, cudaStreamNonBlocking));
  CUDA(cudaMalloc((void**)&d, N * sizeof(float)));
  CUDA(cudaMalloc((void**)&gathered, (size_t)nranks * N * sizeof(float)));
  CHECK(strataCommOnStream(world, stream, &dev));

  for (i = 0; i < N; ++i) in[i] = (float)((rank + 1) * (i % 7));
  CUDA(cudaMemcpyAsync(d, in, sizeof in, cudaMemcpyHostToDevice, stream));
  CHECK(strataAllReduce(d, d, N, strataFloat32, strataSum, dev, NULL));
  CUDA(cudaMemcpyAsync(out, d, sizeof in, cudaMemcpyDeviceToHost, stream));
  CUDA(cudaStreamSynchronize(stream));
  for (i = 0; i < N; ++i) {
    const float want = (float)(nranks * (nranks + 1) / 2 * (i % 7));
    if (out[i] != want) {
      fprintf(stderr, "rank %d: all-reduce element %d: %g, want %g\n", rank, i, out[i], want);
      return 1;
    }
  }

  CUDA(cudaMemcpyAsync(d, in, sizeof in, cudaMemcpyHostToDevice, stream));
  CHECK(strataAllGather(d, gathered, N, strataFloat32, dev, &work));
  CHECK(strataWorkWait(work));
  CHECK(strataWorkFree(work));
  CUDA(cudaMemcpy(out, gathered, (size_t)nranks * N * sizeof(float), cudaMemcpyDeviceToHost));
  for (r = 0; r < nranks; ++r) {
    for (i = 0; i < N; ++i) {
      if (out[r * N + i] != (float)((r + 1) * (i % 7))) {
        fprintf(stderr, "rank %d: all-gather block %d element %d: %g\n", rank, r, i,
                out[r * N + i]);
        return 1;
      }
    }
  }
  { /* a ring of sends before receives in one group: on NCCL, one ncclGroupStart/End */
    const int prev = (rank + nranks - 1) % nranks;
    strataWork_t ring[2];
    CUDA(cudaMemcpyAsync(d, in, sizeof in, cudaMemcpyHostToDevice, stream));
    CHECK(strataGroupStart());
    CHECK(strataSend(d, N, strataFloat32, (rank + 1) % nranks, dev, &ring[0]));
    CHECK(strataRecv(gathered, N, strataFloat32, prev, dev, &ring[1]));
    CHECK(strataGroupEnd());
    for (i = 0; i < 2; ++i) {
      CHECK(strataWorkWait(ring[i]));
      CHECK(strataWorkFree(ring[i]));
    }
    CUDA(cudaMemcpyAsync(out, gathered, sizeof in, cudaMemcpyDeviceToHost, stream));
    CUDA(cudaStreamSynchronize(stream));
    for (i = 0; i < N; ++i) {
      if (out[i] != (float)((prev + 1) * (i % 7))) {
        fprintf(stderr, "rank %d: grouped ring element %d: %g\n", rank, i, out[i]);
        return 1;
      }
    }
  }
  CHECK(strataCommDestroy(dev));
  CHECK(strataCommDestroy(world));
  CUDA(cudaFree(d));
  CUDA(cudaFree(gathered));
  CUDA(cudaStreamDestroy(stream));
  printf("rank %d of %d: C ABI on CUDA memory passed\n", rank, nranks);
  return 0;
}
