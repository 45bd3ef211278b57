// Our own declarations of the NCCL plugin ABI (net v9..v12, tuner v2..v6), written from the facts
// in ../shared/docs/nccl-plugin-abi.md (NCCL 2.28.9; net v12 and tuner v6 from its §9, NCCL
// 2.30.3+; x86-64 LP64). No NCCL or CUDA header is
// needed. Every layout NCCL reads is pinned by static_asserts at the end of this file: a change
// here that moves a member breaks the build, not a job.
//
// Names follow braid's style (namespace braid::abi, PascalCase types); only the exported symbols
// (ncclNetPlugin_vN, ncclTunerPlugin_vN) are spelled as NCCL expects them.
#pragma once

#include <cstddef>
#include <cstdint>

namespace braid::abi {

// ---- results, logging --------------------------------------------------------------------------

/// ncclResult_t (an int enum).
enum Result : int {
  kSuccess = 0,
  kUnhandledCudaError = 1,
  kSystemError = 2,
  kInternalError = 3,
  kInvalidArgument = 4,
  kInvalidUsage = 5,
  kRemoteError = 6,
  kInProgress = 7,
};

/// ncclDebugLogLevel.
enum LogLevel : int {
  kLogNone = 0,
  kLogVersion = 1,
  kLogWarn = 2,
  kLogInfo = 3,
  kLogAbort = 4,
  kLogTrace = 5
};

/// Subsystem bits of the logger's second argument.
inline constexpr unsigned long kSubsysInit = 0x1;
inline constexpr unsigned long kSubsysNet = 0x10;
inline constexpr unsigned long kSubsysTuning = 0x40;
inline constexpr unsigned long kSubsysEnv = 0x80;

/// ncclDebugLogger_t: printf-style, no trailing newline.
using Logger = void (*)(LogLevel level, unsigned long subsys, const char* file, int line,
                        const char* fmt, ...);
/// ncclProfilerCallback_t (we never call it).
using ProfilerCallback = Result (*)(void** eHandle, int type, void* pHandle, int64_t pluginId,
                                    void* extData);

// ---- net constants -----------------------------------------------------------------------------

inline constexpr size_t kNetHandleMaxSize = 128;
inline constexpr int kPtrHost = 0x1;
inline constexpr int kPtrCuda = 0x2;
inline constexpr int kPtrDmaBuf = 0x4;
inline constexpr int kNetMaxRequests = 32;
/// Capacity of a vNIC's device list: 4 up to net v11, 8 from v12 (NCCL 2.30's unversioned
/// constant is the v12 one, so a v11 list must keep the old capacity).
inline constexpr int kNetMaxDevsPerNic = 4;
inline constexpr int kNetMaxDevsPerNicV12 = 8;
/// railId/planeId value for "not known" (NCCL_NET_ID_UNDEF).
inline constexpr int16_t kNetIdUndef = -1;
inline constexpr uint64_t kMaxNetSizeBytes = uint64_t{1} << 40;
/// What NCCL may pre-store in *request for irecv; never returned.
inline void* const kOptionalRecvCompletion = reinterpret_cast<void*>(0x1);

/// ncclNetDeviceType.
enum NetDeviceType : int { kNetDeviceHost = 0, kNetDeviceUnpack = 1 };

// ---- net small structs -------------------------------------------------------------------------

struct NetVDeviceProps {
  int ndevs;
  int devs[kNetMaxDevsPerNic];
};

/// The v12 vNIC: up to 8 fused devices (36 B).
struct NetVDevicePropsV12 {
  int ndevs;
  int devs[kNetMaxDevsPerNicV12];
};

struct NetCommConfig {
  int trafficClass;  ///< -1 = unset
};

struct NetDeviceHandle {
  NetDeviceType netDeviceType;
  int netDeviceVersion;
  void* handle;
  size_t size;
  int needsProxyProgress;
};

struct NetCommAttr {
  int32_t maxConcurrentPeers;
  int32_t minConcurrentPeers;
  int32_t maxFlowsPerPeer;
  int32_t minFlowsPerPeer;
};

struct NetAttrV11 {
  NetCommAttr sendCommAttr;
  NetCommAttr recvCommAttr;
  uint32_t op;
  uint32_t algo;
  uint32_t proto;
};

/// Properties v12 (128 B): v11's members with the larger vProps (so the three size members
/// after it move by 16 bytes), then the device's rail and network plane (-1 = unknown), which
/// NCCL's topology search uses to keep rings on one rail/plane.
struct NetPropertiesV12 {
  char* name;
  char* pciPath;
  uint64_t guid;
  int ptrSupport;
  int regIsGlobal;
  int forceFlush;
  int speed;
  int port;
  float latency;
  int maxComms;
  int maxRecvs;
  NetDeviceType netDeviceType;
  int netDeviceVersion;
  NetVDevicePropsV12 vProps;
  size_t maxP2pBytes;
  size_t maxCollBytes;
  int maxMultiRequestSize;
  int16_t railId;
  int16_t planeId;
};

/// Properties v11 (112 B). v9 and v10 use the first 104 bytes (no maxMultiRequestSize).
struct NetPropertiesV11 {
  char* name;
  char* pciPath;
  uint64_t guid;
  int ptrSupport;
  int regIsGlobal;
  int forceFlush;
  int speed;
  int port;
  float latency;
  int maxComms;
  int maxRecvs;
  NetDeviceType netDeviceType;
  int netDeviceVersion;
  NetVDeviceProps vProps;
  size_t maxP2pBytes;
  size_t maxCollBytes;
  int maxMultiRequestSize;
};

struct NetPropertiesV10 {
  char* name;
  char* pciPath;
  uint64_t guid;
  int ptrSupport;
  int regIsGlobal;
  int forceFlush;
  int speed;
  int port;
  float latency;
  int maxComms;
  int maxRecvs;
  NetDeviceType netDeviceType;
  int netDeviceVersion;
  NetVDeviceProps vProps;
  size_t maxP2pBytes;
  size_t maxCollBytes;
};
using NetPropertiesV9 = NetPropertiesV10;

// ---- net function tables -----------------------------------------------------------------------

/// NetAttr keeps v11's layout in v12.
using NetAttrV12 = NetAttrV11;

/// Net v12: v11's 22 slots in v11's order with v11's parameters; only getProperties, makeVDevice
/// and setNetAttr point at the v12 structs.
struct NetV12 {
  const char* name;
  Result (*init)(void** ctx, uint64_t commId, NetCommConfig* config, Logger logFunction,
                 ProfilerCallback profFunction);
  Result (*devices)(int* ndev);
  Result (*getProperties)(int dev, NetPropertiesV12* props);
  Result (*listen)(void* ctx, int dev, void* handle, void** listenComm);
  Result (*connect)(void* ctx, int dev, void* handle, void** sendComm,
                    NetDeviceHandle** sendDevComm);
  Result (*accept)(void* listenComm, void** recvComm, NetDeviceHandle** recvDevComm);
  Result (*regMr)(void* comm, void* data, size_t size, int type, void** mhandle);
  Result (*regMrDmaBuf)(void* comm, void* data, size_t size, int type, uint64_t offset, int fd,
                        void** mhandle);
  Result (*deregMr)(void* comm, void* mhandle);
  Result (*isend)(void* sendComm, void* data, size_t size, int tag, void* mhandle, void* pHandle,
                  void** request);
  Result (*irecv)(void* recvComm, int n, void** data, size_t* sizes, int* tags, void** mhandles,
                  void** pHandles, void** request);
  Result (*iflush)(void* recvComm, int n, void** data, int* sizes, void** mhandles, void** request);
  Result (*test)(void* request, int* done, int* sizes);
  Result (*closeSend)(void* sendComm);
  Result (*closeRecv)(void* recvComm);
  Result (*closeListen)(void* listenComm);
  Result (*getDeviceMr)(void* comm, void* mhandle, void** dptrMhandle);
  Result (*irecvConsumed)(void* recvComm, int n, void* request);
  Result (*makeVDevice)(int* d, NetVDevicePropsV12* props);
  Result (*finalize)(void* ctx);
  Result (*setNetAttr)(void* ctx, NetAttrV12* netAttr);
};

struct NetV11 {
  const char* name;
  Result (*init)(void** ctx, uint64_t commId, NetCommConfig* config, Logger logFunction,
                 ProfilerCallback profFunction);
  Result (*devices)(int* ndev);
  Result (*getProperties)(int dev, NetPropertiesV11* props);
  Result (*listen)(void* ctx, int dev, void* handle, void** listenComm);
  Result (*connect)(void* ctx, int dev, void* handle, void** sendComm,
                    NetDeviceHandle** sendDevComm);
  Result (*accept)(void* listenComm, void** recvComm, NetDeviceHandle** recvDevComm);
  Result (*regMr)(void* comm, void* data, size_t size, int type, void** mhandle);
  Result (*regMrDmaBuf)(void* comm, void* data, size_t size, int type, uint64_t offset, int fd,
                        void** mhandle);
  Result (*deregMr)(void* comm, void* mhandle);
  Result (*isend)(void* sendComm, void* data, size_t size, int tag, void* mhandle, void* pHandle,
                  void** request);
  Result (*irecv)(void* recvComm, int n, void** data, size_t* sizes, int* tags, void** mhandles,
                  void** pHandles, void** request);
  Result (*iflush)(void* recvComm, int n, void** data, int* sizes, void** mhandles, void** request);
  Result (*test)(void* request, int* done, int* sizes);
  Result (*closeSend)(void* sendComm);
  Result (*closeRecv)(void* recvComm);
  Result (*closeListen)(void* listenComm);
  Result (*getDeviceMr)(void* comm, void* mhandle, void** dptrMhandle);
  Result (*irecvConsumed)(void* recvComm, int n, void* request);
  Result (*makeVDevice)(int* d, NetVDeviceProps* props);
  Result (*finalize)(void* ctx);
  Result (*setNetAttr)(void* ctx, NetAttrV11* netAttr);
};

struct NetV10 {
  const char* name;
  Result (*init)(Logger logFunction, ProfilerCallback profFunction);
  Result (*devices)(int* ndev);
  Result (*getProperties)(int dev, NetPropertiesV10* props);
  Result (*listen)(int dev, void* handle, void** listenComm);
  Result (*connect)(int dev, NetCommConfig* config, void* handle, void** sendComm,
                    NetDeviceHandle** sendDevComm);
  Result (*accept)(void* listenComm, void** recvComm, NetDeviceHandle** recvDevComm);
  Result (*regMr)(void* comm, void* data, size_t size, int type, void** mhandle);
  Result (*regMrDmaBuf)(void* comm, void* data, size_t size, int type, uint64_t offset, int fd,
                        void** mhandle);
  Result (*deregMr)(void* comm, void* mhandle);
  Result (*isend)(void* sendComm, void* data, size_t size, int tag, void* mhandle, void* pHandle,
                  void** request);
  Result (*irecv)(void* recvComm, int n, void** data, size_t* sizes, int* tags, void** mhandles,
                  void** pHandles, void** request);
  Result (*iflush)(void* recvComm, int n, void** data, int* sizes, void** mhandles, void** request);
  Result (*test)(void* request, int* done, int* sizes);
  Result (*closeSend)(void* sendComm);
  Result (*closeRecv)(void* recvComm);
  Result (*closeListen)(void* listenComm);
  Result (*getDeviceMr)(void* comm, void* mhandle, void** dptrMhandle);
  Result (*irecvConsumed)(void* recvComm, int n, void* request);
  Result (*makeVDevice)(int* d, NetVDeviceProps* props);
};

struct NetV9 {
  const char* name;
  Result (*init)(Logger logFunction);
  Result (*devices)(int* ndev);
  Result (*getProperties)(int dev, NetPropertiesV9* props);
  Result (*listen)(int dev, void* handle, void** listenComm);
  Result (*connect)(int dev, void* handle, void** sendComm, NetDeviceHandle** sendDevComm);
  Result (*accept)(void* listenComm, void** recvComm, NetDeviceHandle** recvDevComm);
  Result (*regMr)(void* comm, void* data, size_t size, int type, void** mhandle);
  Result (*regMrDmaBuf)(void* comm, void* data, size_t size, int type, uint64_t offset, int fd,
                        void** mhandle);
  Result (*deregMr)(void* comm, void* mhandle);
  Result (*isend)(void* sendComm, void* data, size_t size, int tag, void* mhandle, void** request);
  Result (*irecv)(void* recvComm, int n, void** data, size_t* sizes, int* tags, void** mhandles,
                  void** request);
  Result (*iflush)(void* recvComm, int n, void** data, int* sizes, void** mhandles, void** request);
  Result (*test)(void* request, int* done, int* sizes);
  Result (*closeSend)(void* sendComm);
  Result (*closeRecv)(void* recvComm);
  Result (*closeListen)(void* listenComm);
  Result (*getDeviceMr)(void* comm, void* mhandle, void** dptrMhandle);
  Result (*irecvConsumed)(void* recvComm, int n, void* request);
  Result (*makeVDevice)(int* d, NetVDeviceProps* props);
};

// ---- tuner -------------------------------------------------------------------------------------

/// ncclFunc_t values the tuner sees (0..4).
enum Func : int {
  kFuncBroadcast = 0,
  kFuncReduce = 1,
  kFuncAllGather = 2,
  kFuncReduceScatter = 3,
  kFuncAllReduce = 4,
};

inline constexpr int kNumAlgorithms = 7;
inline constexpr int kAlgoTree = 0;
inline constexpr int kAlgoRing = 1;
inline constexpr int kAlgoCollNetDirect = 2;
inline constexpr int kAlgoCollNetChain = 3;
inline constexpr int kAlgoNvls = 4;
inline constexpr int kAlgoNvlsTree = 5;
inline constexpr int kAlgoPat = 6;
inline constexpr int kNumProtocols = 3;
inline constexpr int kProtoLL = 0;
inline constexpr int kProtoLL128 = 1;
inline constexpr int kProtoSimple = 2;
/// A cost-table entry that is unsupported or filtered; never changed back.
inline constexpr float kAlgoProtoIgnore = -1.0f;

struct NvlDomainInfoV5 {
  int nNvlDomains;
  int minRanksPerNvlDomain;
  int maxRanksPerNvlDomain;
};

inline constexpr int kNumHwLinks = 3;       // NVLINK, PCI, NET
inline constexpr int kNumComputeCaps = 4;   // Volta, Ampere, Hopper, Blackwell
inline constexpr int kNumTuningScales = 3;  // 1 node, 2 nodes, 4+ nodes

struct TunerConstantsV5 {
  double baseLatencies[kNumAlgorithms][kNumProtocols];
  double hwLatencies[kNumHwLinks][kNumAlgorithms][kNumProtocols];
  double llMaxBws[kNumComputeCaps][kNumTuningScales];
  double perChMaxRingLL128Bws[kNumComputeCaps][kNumTuningScales];
  double perChMaxTreeLL128Bws[kNumComputeCaps][kNumTuningScales];
  double perChMaxTreeBws[kNumComputeCaps][kNumTuningScales];
  double perChMaxNVLSTreeBws[kNumComputeCaps][kNumTuningScales];
};

struct TunerV5 {
  const char* name;
  Result (*init)(void** ctx, uint64_t commId, size_t nRanks, size_t nNodes, Logger logFunction,
                 NvlDomainInfoV5* nvlDomainInfo, TunerConstantsV5* constants);
  Result (*getCollInfo)(void* ctx, Func collType, size_t nBytes, int numPipeOps,
                        float** collCostTable, int numAlgo, int numProto, int regBuff,
                        int* nChannels);
  Result (*finalize)(void* ctx);
};

/// Tuner v6 (40 B): v5's four slots, then the optional getChunkSize, called once algorithm,
/// protocol and channels are chosen with NCCL's chunk in *chunkSize (NCCL caps what comes back
/// at the protocol's buffer and rounds it down to the protocol's grain). Constants and NVL domain
/// information are v5's.
using NvlDomainInfoV6 = NvlDomainInfoV5;
using TunerConstantsV6 = TunerConstantsV5;
struct TunerV6 {
  const char* name;
  Result (*init)(void** ctx, uint64_t commId, size_t nRanks, size_t nNodes, Logger logFunction,
                 NvlDomainInfoV6* nvlDomainInfo, TunerConstantsV6* constants);
  Result (*getCollInfo)(void* ctx, Func collType, size_t nBytes, int numPipeOps,
                        float** collCostTable, int numAlgo, int numProto, int regBuff,
                        int* nChannels);
  Result (*finalize)(void* ctx);
  Result (*getChunkSize)(void* ctx, Func collType, size_t nBytes, int algo, int proto,
                         int nChannels, size_t* chunkSize);
};

/// The grain NCCL rounds a tuner's chunk down to, per protocol (LL, LL128, SIMPLE).
inline constexpr size_t kChunkGrainBytes[kNumProtocols] = {16, 1920, 512};

struct TunerV4 {
  const char* name;
  Result (*init)(size_t nRanks, size_t nNodes, Logger logFunction, void** ctx);
  Result (*getCollInfo)(void* ctx, Func collType, size_t nBytes, int numPipeOps,
                        float** collCostTable, int numAlgo, int numProto, int regBuff,
                        int* nChannels);
  Result (*destroy)(void* ctx);
};

struct TunerV3 {
  const char* name;
  Result (*init)(size_t nRanks, size_t nNodes, Logger logFunction, void** ctx);
  Result (*getCollInfo)(void* ctx, Func collType, size_t nBytes, int numPipeOps,
                        float** collCostTable, int numAlgo, int numProto, int* nChannels);
  Result (*destroy)(void* ctx);
};

struct TunerV2 {
  const char* name;
  Result (*init)(size_t nRanks, size_t nNodes, Logger logFunction, void** ctx);
  Result (*getCollInfo)(void* ctx, Func collType, size_t nBytes, int collNetSupport,
                        int nvlsSupport, int numPipeOps, int* algorithm, int* protocol,
                        int* nChannels);
  Result (*destroy)(void* ctx);
};

// ---- layout pins (ABI doc §1.3, §1.4, §1.5, §3, §9) --------------------------------------------

static_assert(sizeof(int) == 4 && sizeof(void*) == 8 && sizeof(size_t) == 8, "LP64 only");
static_assert(sizeof(NetVDeviceProps) == 20, "VDeviceProps");
static_assert(sizeof(NetCommConfig) == 4, "CommConfig");
static_assert(sizeof(NetDeviceHandle) == 32, "DeviceHandle");
static_assert(sizeof(NetAttrV11) == 44, "NetAttr v11");

static_assert(sizeof(NetPropertiesV11) == 112, "properties v11");
static_assert(offsetof(NetPropertiesV11, name) == 0);
static_assert(offsetof(NetPropertiesV11, pciPath) == 8);
static_assert(offsetof(NetPropertiesV11, guid) == 16);
static_assert(offsetof(NetPropertiesV11, ptrSupport) == 24);
static_assert(offsetof(NetPropertiesV11, regIsGlobal) == 28);
static_assert(offsetof(NetPropertiesV11, forceFlush) == 32);
static_assert(offsetof(NetPropertiesV11, speed) == 36);
static_assert(offsetof(NetPropertiesV11, port) == 40);
static_assert(offsetof(NetPropertiesV11, latency) == 44);
static_assert(offsetof(NetPropertiesV11, maxComms) == 48);
static_assert(offsetof(NetPropertiesV11, maxRecvs) == 52);
static_assert(offsetof(NetPropertiesV11, netDeviceType) == 56);
static_assert(offsetof(NetPropertiesV11, netDeviceVersion) == 60);
static_assert(offsetof(NetPropertiesV11, vProps) == 64);
static_assert(offsetof(NetPropertiesV11, maxP2pBytes) == 88);
static_assert(offsetof(NetPropertiesV11, maxCollBytes) == 96);
static_assert(offsetof(NetPropertiesV11, maxMultiRequestSize) == 104);
static_assert(sizeof(NetPropertiesV10) == 104, "properties v9/v10");
static_assert(offsetof(NetPropertiesV10, maxCollBytes) == 96);

static_assert(sizeof(NetV11) == 176, "net table v11: 22 slots");
static_assert(offsetof(NetV11, init) == 8 && offsetof(NetV11, isend) == 80);
static_assert(offsetof(NetV11, test) == 104 && offsetof(NetV11, makeVDevice) == 152);
static_assert(offsetof(NetV11, finalize) == 160 && offsetof(NetV11, setNetAttr) == 168);
static_assert(sizeof(NetV10) == 160 && sizeof(NetV9) == 160, "net tables v9/v10: 20 slots");

static_assert(sizeof(NetVDevicePropsV12) == 36, "VDeviceProps v12");
static_assert(sizeof(NetPropertiesV12) == 128, "properties v12");
static_assert(offsetof(NetPropertiesV12, netDeviceVersion) == 60);
static_assert(offsetof(NetPropertiesV12, vProps) == 64);
static_assert(offsetof(NetPropertiesV12, maxP2pBytes) == 104);
static_assert(offsetof(NetPropertiesV12, maxCollBytes) == 112);
static_assert(offsetof(NetPropertiesV12, maxMultiRequestSize) == 120);
static_assert(offsetof(NetPropertiesV12, railId) == 124);
static_assert(offsetof(NetPropertiesV12, planeId) == 126);
static_assert(sizeof(NetV12) == 176, "net table v12: v11's 22 slots");
static_assert(offsetof(NetV12, getProperties) == offsetof(NetV11, getProperties));
static_assert(offsetof(NetV12, isend) == 80 && offsetof(NetV12, test) == 104);
static_assert(offsetof(NetV12, makeVDevice) == 152 && offsetof(NetV12, finalize) == 160);
static_assert(offsetof(NetV12, setNetAttr) == 168);
static_assert(offsetof(NetV10, makeVDevice) == 152 && offsetof(NetV9, makeVDevice) == 152);

static_assert(sizeof(NvlDomainInfoV5) == 12, "NvlDomainInfo v5");
static_assert(sizeof(TunerConstantsV5) == 1152, "tuner constants v5");
static_assert(offsetof(TunerConstantsV5, hwLatencies) == 168);
static_assert(offsetof(TunerConstantsV5, llMaxBws) == 672);
static_assert(offsetof(TunerConstantsV5, perChMaxRingLL128Bws) == 768);
static_assert(offsetof(TunerConstantsV5, perChMaxTreeLL128Bws) == 864);
static_assert(offsetof(TunerConstantsV5, perChMaxTreeBws) == 960);
static_assert(offsetof(TunerConstantsV5, perChMaxNVLSTreeBws) == 1056);
static_assert(sizeof(TunerV5) == 32 && sizeof(TunerV4) == 32, "tuner tables: 4 slots");
static_assert(sizeof(TunerV3) == 32 && sizeof(TunerV2) == 32, "tuner tables: 4 slots");
static_assert(offsetof(TunerV5, finalize) == 24);
static_assert(sizeof(TunerV6) == 40, "tuner table v6: 5 slots");
static_assert(offsetof(TunerV6, finalize) == 24 && offsetof(TunerV6, getChunkSize) == 32);

}  // namespace braid::abi
