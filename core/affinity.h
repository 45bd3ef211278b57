// Where braid's own threads run.
//
// A rank's communicator worker (its asynchronous collectives) and its Bucketer engine run that
// rank's share of every same-host collective they issue. Left to the scheduler, the two ranks'
// threads on the 2-core VM shared one core for milliseconds at a time after they had slept:
// 9 MiB all-reduces issued asynchronously 50 ms apart took 3.1-3.3 ms whenever both workers were
// found on one CPU afterwards, against 1.0-1.3 ms on two (/proc/self/task/*/stat read after
// each call). braid-train-bench --ranks 2 -m auto, BRAID_BIND_THREADS=off against auto in the
// same binary, 4 alternated pairs: the bucket all-reduces before the tail took 0.46-0.71 ms at
// the median and 1.31-1.44 ms at p75 against 0.95-1.01 and 1.62-1.95 (BERT-base), 1.23-1.35 and
// 1.50-1.83 against 1.45-1.49 and 2.62-2.93 (GPT-2 small); BERT-base's exposed time 23.6-29.2
// ms against 30.9-36.6. GPT-2's exposed time (mostly its 154 MB tail, a memory-bound
// all-reduce) and ResNet-50's (6 more pairs) did not move beyond their noise.
//
// Rule (BRAID_BIND_THREADS=auto, the default), decided once per process when its first
// communicator is created: the CPUs in the creating thread's affinity mask, in order, are cut
// into as many contiguous groups as there are ranks on this machine (emulated hosts in network
// namespaces share one machine), whose sizes differ by at most one, and this rank's threads keep
// to group `machineIndex`. Nothing is bound when the mask holds fewer CPUs than the machine has
// ranks (ranks that share cores must be free to move), with one rank, or with
// BRAID_BIND_THREADS=off. Ranks the user bound to cores of their own keep to those cores: the
// group is cut from each rank's own mask. Threads of the caller are never touched.
#pragma once

namespace braid {

/// Decides this process's share of the CPUs by the rule above from its index among the ranks on
/// its machine and their number (one INFO line says which). The first call in a process decides;
/// later ones do nothing.
void chooseOwnThreadCpus(int machineIndex, int machineRanks);

/// Names the calling thread (`name`, at most 15 characters, as `top -H` and `perf` show it) and
/// restricts it to the share chosen (left unbound when none was, or none was chosen yet).
void placeOwnThread(const char* name);

}  // namespace braid
