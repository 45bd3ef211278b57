"""Step time of data-parallel paths in one run: DistributedDataParallel over gloo (default
buckets), DDP with braid's comm hook, DDP over the braid backend (a "braid" process group, no
hook; and the same with gradient_as_bucket_view=True, "views"), and braid.torch.DataParallel.

    torchrun --standalone --nproc_per_node 2 --redirects 1 --tee 1 \\
        examples/bench_ddp_step.py [--model mlp|cnn] [--steps 20 --rounds 3 --batch 32]
        [--json out.jsonl]

(torch 1.13 with Python 3.11 needs --redirects 1 --tee 1.) Models: --model mlp (default), MLP
1024-2048-2048-2048-1024 with ReLU (--sizes); --model cnn, a convolutional net with BatchNorm
(3x32x32 input, conv 32-64-128 with BatchNorm and ReLU, pooling, linear 10; --channels), whose
running statistics DDP and DataParallel broadcast from rank 0 before every forward. SGD, batch
32 per rank, one intra-op thread per rank (torch.set_num_threads(1)).
With --local, the bare model (no communication at all) is timed too, as the compute floor, and
DDP with a comm hook that communicates nothing (with and without views): DDP's own work (its
copies into and out of its buckets, its hooks), the floor under every DDP path.
The paths run in interleaved rounds (same processes, same data); a step is zero_grad +
forward + backward + optimizer step, timed on every rank; the table shows per path the median
over steps of the slowest rank's step time, and the ratio to DDP-gloo.
"""

import argparse
import json
import os
import platform
import statistics
import sys
import time

import torch
import torch.distributed as dist
from torch.nn.parallel import DistributedDataParallel as DDP

import braid
import braid.torch


def mlp(sizes):
    layers = []
    for a, b in zip(sizes[:-1], sizes[1:]):
        layers += [torch.nn.Linear(a, b), torch.nn.ReLU()]
    return torch.nn.Sequential(*layers[:-1])


class ConvNet(torch.nn.Module):
    """Three conv-BatchNorm-ReLU blocks (the first two pooled), global pooling, a classifier."""

    def __init__(self, channels):
        super().__init__()
        layers, c_in = [], 3
        for i, c in enumerate(channels):
            layers += [torch.nn.Conv2d(c_in, c, 3, padding=1, bias=False),
                       torch.nn.BatchNorm2d(c), torch.nn.ReLU()]
            if i < len(channels) - 1:
                layers.append(torch.nn.MaxPool2d(2))
            c_in = c
        self.features = torch.nn.Sequential(*layers)
        self.head = torch.nn.Linear(c_in, 10)

    def forward(self, x):
        return self.head(self.features(x).mean((2, 3)))


def _no_communication(state, bucket):
    """A DDP comm hook that communicates nothing: the bucket comes back as it went in."""
    fut = torch.futures.Future()
    fut.set_result(bucket.buffer())
    return fut


def blas_library():
    """The BLAS this process actually loaded (Debian's torch calls libblas.so.3, which the
    alternatives system points at the reference BLAS or at OpenBLAS)."""
    try:
        with open("/proc/self/maps") as f:
            libs = {line.split()[-1] for line in f if "blas" in line.lower()}
        return ", ".join(sorted(os.path.realpath(l) for l in libs)) or "none loaded"
    except OSError:
        return "unknown"


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--steps", type=int, default=20, help="timed steps per path per round")
    ap.add_argument("--warmup", type=int, default=5)
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--batch", type=int, default=32)
    ap.add_argument("--model", choices=["mlp", "cnn"], default="mlp")
    ap.add_argument("--sizes", default="1024,2048,2048,2048,1024", help="MLP layer widths")
    ap.add_argument("--channels", default="32,64,128", help="CNN channels per block")
    ap.add_argument("--image", type=int, default=32, help="CNN input height and width")
    ap.add_argument("--threads", type=int, default=1)
    ap.add_argument("--codec", default=None, help="also time the hook with this codec")
    ap.add_argument("--json", default=None, help="append one JSON line per path (rank 0)")
    ap.add_argument("--local", action="store_true",
                    help="also time the model without any data parallelism (compute floor)")
    a = ap.parse_args()

    torch.set_num_threads(a.threads)
    dist.init_process_group("gloo")
    rank, world = dist.get_rank(), dist.get_world_size()
    comm = braid.init()  # torchrun variables; braid's own store on MASTER_PORT + 1
    braid_pg = dist.new_group(backend="braid")  # the backend, over torch's store
    sizes = [int(s) for s in a.sizes.split(",")]
    channels = [int(c) for c in a.channels.split(",")]

    def fresh():
        torch.manual_seed(0)
        return mlp(sizes) if a.model == "mlp" else ConvNet(channels)

    paths = {}
    paths["ddp-gloo"] = DDP(fresh())
    hooked = DDP(fresh())
    hook = braid.torch.ddp_hook(comm)
    hooked.register_comm_hook(None, hook)
    paths["ddp+braid-hook"] = hooked
    if a.codec:
        hc = DDP(fresh())
        hook_c = braid.torch.ddp_hook(comm, codec=a.codec)
        hc.register_comm_hook(None, hook_c)
        paths[f"ddp+braid-hook({a.codec})"] = hc
    paths["ddp-braid-backend"] = DDP(fresh(), process_group=braid_pg)
    # DDP's gradient_as_bucket_view: no copy of the gradients into DDP's buckets and back (what
    # braid.DataParallel's default zero-copy mode does too).
    paths["ddp-braid-backend(views)"] = DDP(fresh(), process_group=braid_pg,
                                            gradient_as_bucket_view=True)
    dp = braid.torch.DataParallel(fresh(), comm=comm)
    paths["braid.DataParallel"] = dp
    if a.local:
        paths["local (no communication)"] = fresh()
        # DDP's own work with nothing communicated (a hook that hands the bucket back): the floor
        # under every DDP path, and the same with gradient views.
        nocomm = DDP(fresh())
        nocomm.register_comm_hook(None, _no_communication)
        paths["ddp, no communication"] = nocomm
        nocomm_v = DDP(fresh(), gradient_as_bucket_view=True)
        nocomm_v.register_comm_hook(None, _no_communication)
        paths["ddp(views), no communication"] = nocomm_v
    opts = {k: torch.optim.SGD(m.parameters(), lr=1e-3) for k, m in paths.items()}
    g = torch.Generator().manual_seed(rank)
    if a.model == "mlp":
        x = torch.randn(a.batch, sizes[0], generator=g)
        y = torch.randn(a.batch, sizes[-1], generator=g)
        loss_fn = torch.nn.functional.mse_loss
    else:
        x = torch.randn(a.batch, 3, a.image, a.image, generator=g)
        y = torch.randint(0, 10, (a.batch,), generator=g)
        loss_fn = torch.nn.functional.cross_entropy

    def step(name):
        m, opt = paths[name], opts[name]
        opt.zero_grad()
        loss = loss_fn(m(x), y)
        loss.backward()
        opt.step()

    times = {k: [] for k in paths}
    for name in paths:
        for _ in range(a.warmup):
            step(name)
    for _ in range(a.rounds):
        for name in paths:
            dist.barrier()
            for _ in range(a.steps):
                t0 = time.perf_counter()
                step(name)
                times[name].append((time.perf_counter() - t0) * 1e3)
    # Slowest rank per step (a step ends when every rank has its gradients).
    table = {}
    for name, ts in times.items():
        t = torch.tensor(ts, dtype=torch.float64)
        dist.all_reduce(t, op=dist.ReduceOp.MAX)
        table[name] = t.tolist()
    hook_m = hook.metrics()
    dp_m = dp.metrics
    if rank == 0:
        nparams = sum(p.numel() for p in paths["ddp-gloo"].parameters())
        print(f"# bench_ddp_step: {world} ranks, torch {torch.__version__}, python "
              f"{platform.python_version()}, {os.cpu_count()} cpus, threads/rank {a.threads}")
        print(f"# BLAS: {blas_library()}")
        desc = f"MLP {a.sizes}" if a.model == "mlp" else \
            f"CNN+BatchNorm channels {a.channels}, {a.image}x{a.image} input"
        print(f"# model {desc} ({nparams / 1e6:.2f} M params, {nparams * 4 / 2**20:.1f} MiB"
              f" of gradients), batch {a.batch}, {a.rounds} rounds x {a.steps} steps, warmup "
              f"{a.warmup}; BRAID_* = "
              + " ".join(f"{k}={v}" for k, v in os.environ.items() if k.startswith("BRAID_")))
        base = statistics.median(table["ddp-gloo"])
        print(f"{'path':<34}{'median ms':>10}{'mean ms':>10}{'min ms':>10}{'vs gloo':>9}"
              f"{'vs DP':>7}")
        dp_med = statistics.median(table["braid.DataParallel"])
        for name, ts in table.items():
            med = statistics.median(ts)
            print(f"{name:<34}{med:>10.2f}{statistics.mean(ts):>10.2f}{min(ts):>10.2f}"
                  f"{med / base:>9.2f}{med / dp_med:>7.2f}")
            if a.json:
                with open(a.json, "a") as f:
                    f.write(json.dumps({"path": name, "median_ms": med, "ratio": med / base,
                                        "world": world, "batch": a.batch, "model": a.model,
                                        "sizes": a.sizes if a.model == "mlp" else a.channels,
                                        "threads": a.threads}) + "\n")
        print(f"# braid hook, last step: {hook_m}")
        print(f"# braid DataParallel, last step: step {dp_m.step_ms:.2f} ms, comm "
              f"{dp_m.comm_ms:.2f} ms, exposed {dp_m.exposed_ms:.2f} ms, eta {dp_m.eta:.2f}, "
              f"{len(dp_m.buckets)} buckets, {dp_m.bytes / 2**20:.1f} MiB")
    dist.barrier()
    hook.close()
    dp.close()
    comm.close()
    dist.destroy_process_group()
    return 0


if __name__ == "__main__":
    sys.exit(main())
