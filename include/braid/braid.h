/* braid C API, in NCCL's style. Every function returns a braidResult_t whose values 0..7 equal
 * ncclResult_t's; no exception or signal crosses this boundary. Buffers are host memory.
 *
 *   braidUniqueId id;                 // on rank 0, then share it out of band
 *   braidGetUniqueId(&id);
 *   braidComm_t comm;
 *   braidCommInitRank(&comm, nranks, id, rank);
 *   braidAllReduce(send, recv, count, braidFloat32, braidSum, comm);
 *   braidCommDestroy(comm);
 *
 * or braidCommInitFromEnv(&comm) under torchrun / mpiexec / BRAID_FILE_STORE. */
#ifndef BRAID_BRAID_H_
#define BRAID_BRAID_H_

#include <stddef.h>

#ifdef __cplusplus
extern "C" {
#endif

#define BRAID_VERSION_CODE 100 /* 0.1.0 */

typedef enum {
  braidSuccess = 0,
  braidUnhandledCudaError = 1,
  braidSystemError = 2,
  braidInternalError = 3,
  braidInvalidArgument = 4,
  braidInvalidUsage = 5,
  braidRemoteError = 6,
  braidInProgress = 7,
  braidTimeout = 8,
} braidResult_t;

typedef enum {
  braidInt8 = 0, braidChar = 0,
  braidUint8 = 1,
  braidInt32 = 2, braidInt = 2,
  braidUint32 = 3,
  braidInt64 = 4,
  braidUint64 = 5,
  braidFloat16 = 6, braidHalf = 6,
  braidFloat32 = 7, braidFloat = 7,
  braidFloat64 = 8, braidDouble = 8,
  braidBfloat16 = 9,
} braidDataType_t;

typedef enum { braidSum = 0, braidProd = 1, braidMax = 2, braidMin = 3, braidAvg = 4 } braidRedOp_t;

#define BRAID_UNIQUE_ID_BYTES 128
/** Opaque: the rendezvous address and the job secret. */
typedef struct {
  char internal[BRAID_UNIQUE_ID_BYTES];
} braidUniqueId;

typedef struct braidComm* braidComm_t;

/** Library version as major*10000 + minor*100 + patch. */
braidResult_t braidGetVersion(int* version);
/** Short text for a result code. */
const char* braidGetErrorString(braidResult_t result);
/** The message of the last failed call on this thread (empty when none). */
const char* braidGetLastError(braidComm_t comm);

/** Makes a unique id and serves its rendezvous from this process until it exits. Listens on
 * BRAID_SOCKET_IFNAME's interface (or 127.0.0.1 for single-host jobs when none is up). */
braidResult_t braidGetUniqueId(braidUniqueId* uniqueId);
/** Collective over nranks processes that all pass the same id. */
braidResult_t braidCommInitRank(braidComm_t* comm, int nranks, braidUniqueId commId, int rank);
/** Bootstraps from torchrun variables, mpiexec, or BRAID_FILE_STORE. */
braidResult_t braidCommInitFromEnv(braidComm_t* comm);
/** Collective over comm, like ncclCommSplit: the ranks passing the same color (>= 0) form a new
 * communicator ranked by (key, rank in comm); BRAID_SPLIT_NOCOLOR takes part and gets NULL. */
#define BRAID_SPLIT_NOCOLOR (-1)
braidResult_t braidCommSplit(braidComm_t comm, int color, int key, braidComm_t* newcomm);
/** Like ncclCommShrink: a new communicator of comm's ranks that are not in excludeRanksList
 * (excludeRanksCount ranks of comm, any order, no duplicates; the list may be NULL when the
 * count is 0), renumbered densely in comm's rank order. Called by every rank that stays, with
 * the same list, also on a failed comm (after braidCommGetAsyncError reports an error): the
 * survivors of a dead rank exclude it and go on. A rank that stays but does not call within
 * BRAID_TIMEOUT_MS is a braidTimeout naming it; a different list is braidInvalidUsage. An
 * excluded rank need not call; one that does gets *newcomm = NULL. shrinkFlags:
 * BRAID_SHRINK_DEFAULT releases a failed comm's connections and threads and keeps a healthy one
 * usable; BRAID_SHRINK_ABORT fails comm first (its operations in flight end on every rank) and
 * releases it. comm itself is still destroyed with braidCommDestroy. */
#define BRAID_SHRINK_DEFAULT 0x00
#define BRAID_SHRINK_ABORT 0x01
braidResult_t braidCommShrink(braidComm_t comm, int* excludeRanksList, int excludeRanksCount,
                              braidComm_t* newcomm, int shrinkFlags);
/** Like MPI_Comm_create_group: called only by the nranks ranks of comm listed in ranks (no
 * duplicates, the caller among them), which form a new communicator ranked in list order; the
 * other ranks of comm do not call. Every member passes the same list; a member that does not
 * call within BRAID_TIMEOUT_MS (or passes another list) is a braidTimeout naming it. The new one
 * shares comm's store, job secret, transport and calibrated model. */
braidResult_t braidCommSubgroup(braidComm_t comm, const int* ranks, int nranks,
                                braidComm_t* newcomm);
/** Frees the communicator; call on every rank after its last operation. */
braidResult_t braidCommDestroy(braidComm_t comm);
/** Fails the communicator (peers' pending operations return errors) and frees it. */
braidResult_t braidCommAbort(braidComm_t comm);
/** braidSuccess, or the error that failed the communicator. */
braidResult_t braidCommGetAsyncError(braidComm_t comm, braidResult_t* asyncError);
/** Shared windows (Communicator::allocShared): *ptr gets `size` zeroed bytes that every rank
 *  on this host maps; an all-reduce, reduce-scatter, all-gather or broadcast whose buffers lie
 *  in windows on every rank copies nothing through braid's staging segment. Collective, in the
 *  same order as the other operations. */
braidResult_t braidCommAllocShared(braidComm_t comm, size_t size, void** ptr);
/** Frees a window of braidCommAllocShared on this rank (local, as ncclMemFree). */
braidResult_t braidCommFreeShared(braidComm_t comm, void* ptr);
/** Where rank's part of the window `window` (this rank's pointer from braidCommAllocShared) is
 *  mapped in this process, and its size, as MPI_Win_shared_query; braidInvalidArgument when
 *  rank's memory is not mapped here (another host, tcp forced, one rank on this host). */
braidResult_t braidCommSharedQuery(braidComm_t comm, const void* window, int rank, void** ptr,
                                   size_t* size);
braidResult_t braidCommCount(const braidComm_t comm, int* count);
braidResult_t braidCommUserRank(const braidComm_t comm, int* rank);

braidResult_t braidAllReduce(const void* sendbuff, void* recvbuff, size_t count,
                             braidDataType_t datatype, braidRedOp_t op, braidComm_t comm);
braidResult_t braidReduceScatter(const void* sendbuff, void* recvbuff, size_t recvcount,
                                 braidDataType_t datatype, braidRedOp_t op, braidComm_t comm);
braidResult_t braidAllGather(const void* sendbuff, void* recvbuff, size_t sendcount,
                             braidDataType_t datatype, braidComm_t comm);
braidResult_t braidBroadcast(const void* sendbuff, void* recvbuff, size_t count,
                             braidDataType_t datatype, int root, braidComm_t comm);
braidResult_t braidReduce(const void* sendbuff, void* recvbuff, size_t count,
                          braidDataType_t datatype, braidRedOp_t op, int root, braidComm_t comm);
braidResult_t braidAllToAll(const void* sendbuff, void* recvbuff, size_t count,
                            braidDataType_t datatype, braidComm_t comm);
braidResult_t braidBarrier(braidComm_t comm);
braidResult_t braidSend(const void* sendbuff, size_t count, braidDataType_t datatype, int peer,
                        braidComm_t comm);
braidResult_t braidRecv(void* recvbuff, size_t count, braidDataType_t datatype, int peer,
                        braidComm_t comm);

/** One send (isSend != 0: buff is read) or receive (buff is written) of braidSendRecvGroup. */
typedef struct {
  int isSend;
  void* buff;
  size_t count;
  braidDataType_t datatype;
  int peer;
} braidP2pOp_t;
/** Posts every send and receive of ops at once and waits for all of them, as
 *  ncclGroupStart/ncclGroupEnd around ncclSend/ncclRecv: ranks that send to each other before
 *  they receive do not wait on each other. Messages between two ranks keep their order per
 *  direction; a receive's count must equal the matching send's. */
braidResult_t braidSendRecvGroup(const braidP2pOp_t* ops, size_t nops, braidComm_t comm);

#ifdef __cplusplus
}
#endif

#endif /* BRAID_BRAID_H_ */
