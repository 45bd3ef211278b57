// `braid-info nccl`: resolves NCCL net and tuner plugin names exactly as NCCL 2.28 does, loads
// them, and reports exported versions, which one NCCL 2.28/2.29 and 2.30.3+ (and the
// libnccl.so.2 found) would bind, struct sizes, devices and their properties, with a
// plain-language reason for each failure (ABI doc §1.1, §3, §5, §9); --nccl-log reads what a
// real NCCL run bound from its debug output.
#pragma once

/// argv[0] is "nccl". Exit code 0 when the plugins load and look usable, 1 when a problem was
/// found, 2 on a usage error.
int runInfoNccl(int argc, char** argv);
