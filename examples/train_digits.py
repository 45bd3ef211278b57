"""Train a small MLP on the `digits` data (1797 8x8 images, 10 classes) with braid, 2-4 ranks.

    scripts/fetch_digits.sh build/data              # once: build/data/digits.csv
    torchrun --standalone --nproc_per_node 2 --redirects 1 --tee 1 \\
        examples/train_digits.py [--mode dataparallel|ddp|ddp-hook] [--backend gloo|braid]
        [--codec fp16] [--epochs 10]

(torch 1.13 with Python 3.11 needs --redirects 1 --tee 1; `braid-run -n 2 -- python3 ...`
works too.) --mode dataparallel (default) uses braid.torch.DataParallel (no torch.distributed
process group at all); --mode ddp-hook uses DistributedDataParallel over a gloo group with
braid's comm hook doing the gradient all-reduce; --mode ddp is plain DistributedDataParallel
over the process group of --backend (--backend braid alone selects it: DDP over braid's
torch.distributed backend, `init_process_group("braid")`, no hook). --codec compresses gradients ("fp16", "bf16",
"powersgd:rank=2,start=20", "topk:ratio=0.05", "int8", "sign"). Rank 0 prints the loss and
accuracy per epoch and braid's step metrics of the epoch's last step.

Data: --data FILE, else $BRAID_DATA_DIR/digits.csv, else build/data/digits.csv. Without the
file the script says how to fetch it and trains on synthetic stand-in data (--synthetic forces
that): ten Gaussian blobs in 64 dimensions, which only shows that the loop runs.
"""

import argparse
import os
import sys
import time

import torch

import braid
import braid.torch


def load_digits(path):
    rows = [line.split(",") for line in open(path) if line.strip()]
    data = torch.tensor([[float(v) for v in r] for r in rows])
    return data[:, :64] / 16.0, data[:, 64].long()


def synthetic(n=1797, seed=0):
    g = torch.Generator().manual_seed(seed)
    centers = torch.randn(10, 64, generator=g) * 2
    y = torch.randint(0, 10, (n,), generator=g)
    return centers[y] + torch.randn(n, 64, generator=g), y


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--mode", choices=["dataparallel", "ddp", "ddp-hook"], default=None,
                    help="default: dataparallel, or ddp when --backend is given")
    ap.add_argument("--backend", choices=["gloo", "braid"], default=None,
                    help="torch.distributed backend of the ddp modes (default gloo)")
    ap.add_argument("--codec", default=None)
    ap.add_argument("--epochs", type=int, default=10)
    ap.add_argument("--batch", type=int, default=32, help="per rank")
    ap.add_argument("--lr", type=float, default=0.1)
    ap.add_argument("--data", default=None)
    ap.add_argument("--synthetic", action="store_true")
    a = ap.parse_args()
    if a.mode is None:
        a.mode = "ddp" if a.backend else "dataparallel"
    if a.mode == "dataparallel" and a.backend:
        ap.error("--backend selects the process group of --mode ddp or ddp-hook; "
                 "dataparallel needs none")
    if a.mode == "ddp" and a.codec:
        ap.error("--codec goes through braid's hook: use --mode ddp-hook or dataparallel")
    backend = a.backend or "gloo"
    torch.set_num_threads(1)

    path = a.data or os.path.join(os.environ.get("BRAID_DATA_DIR", "build/data"), "digits.csv")
    if not a.synthetic and os.path.exists(path):
        x, y = load_digits(path)
        source = path
    else:
        x, y = synthetic()
        source = "synthetic blobs (run scripts/fetch_digits.sh for the real digits data)"

    import torch.distributed as dist
    comm = None
    if a.mode == "ddp":
        dist.init_process_group(backend)  # "braid": registered by `import braid.torch`
        rank, world = dist.get_rank(), dist.get_world_size()
    else:
        if a.mode == "ddp-hook":
            dist.init_process_group(backend)
        comm = braid.init()  # braid's store on MASTER_PORT + 1 under torchrun
        rank, world = comm.rank, comm.size

    def average(t):
        if comm is None:
            dist.all_reduce(t)
            return t / world
        return comm.all_reduce(t, op="avg")

    def from_rank0(t):
        if comm is None:
            dist.broadcast(t, 0)
            return t
        return comm.broadcast(t, root=0)

    # Same split on every rank: the last 297 samples are held out; each rank takes every
    # world-th training sample.
    g = torch.Generator().manual_seed(0)
    perm = torch.randperm(len(y), generator=g)
    test_idx, train_idx = perm[-297:], perm[:-297]
    mine = train_idx[rank::world]

    torch.manual_seed(0)
    net = torch.nn.Sequential(torch.nn.Linear(64, 128), torch.nn.ReLU(), torch.nn.Linear(128, 128),
                              torch.nn.ReLU(), torch.nn.Linear(128, 10))
    hook = None
    if a.mode == "ddp":
        model = torch.nn.parallel.DistributedDataParallel(net)
    elif a.mode == "ddp-hook":
        model = torch.nn.parallel.DistributedDataParallel(net)
        hook = braid.torch.ddp_hook(comm, codec=a.codec)
        model.register_comm_hook(None, hook)
    else:
        model = braid.torch.DataParallel(net, comm=comm, codec=a.codec)
    opt = torch.optim.SGD(model.parameters(), lr=a.lr, momentum=0.9)

    if rank == 0:
        pg = f" over {dist.get_backend()}" if a.mode != "dataparallel" else ""
        print(f"train_digits: {world} ranks, mode {a.mode}{pg}, codec {a.codec or 'none'}, data "
              f"{source}, {len(mine)} training samples per rank, batch {a.batch}/rank",
              flush=True)
    steps = len(mine) // a.batch
    for epoch in range(a.epochs):
        order = mine[torch.randperm(len(mine), generator=torch.Generator().manual_seed(epoch))]
        t0, total = time.perf_counter(), 0.0
        model.train()
        for s in range(steps):
            idx = order[s * a.batch:(s + 1) * a.batch]
            opt.zero_grad()
            loss = torch.nn.functional.cross_entropy(model(x[idx]), y[idx])
            loss.backward()
            opt.step()
            total += loss.item()
        # Mean training loss over ranks, held-out accuracy (identical weights on every rank).
        mean = average(torch.tensor([total / steps])).item()
        model.eval()
        with torch.no_grad():
            acc = (net(x[test_idx]).argmax(1) == y[test_idx]).float().mean().item()
        if rank == 0:
            if a.mode == "ddp":
                metrics = "DDP's own buckets over the process group"
            elif hook is not None:
                m = hook.metrics()
                metrics = (f"{m['buckets']} buckets, {m['bytes'] / 1024:.0f} KiB -> "
                           f"{m['wire_bytes'] / 1024:.0f} KiB on the wire, comm "
                           f"{m['comm_ms']:.2f} ms, exposed {m['exposed_ms']:.2f} ms")
            else:
                m = model.metrics
                metrics = (f"{len(m.buckets)} buckets, {m.bytes / 1024:.0f} KiB -> "
                           f"{m.wire_bytes / 1024:.0f} KiB on the wire, comm {m.comm_ms:.2f} ms, "
                           f"exposed {m.exposed_ms:.2f} ms, eta {m.eta:.2f}, skew "
                           f"{m.max_skew_ms:.2f} ms (rank {m.slowest_rank})")
            print(f"epoch {epoch + 1:2d}  loss {mean:.4f}  test accuracy {acc * 100:5.1f}%  "
                  f"{(time.perf_counter() - t0) * 1e3 / steps:.2f} ms/step | braid: {metrics}",
                  flush=True)
    # Every rank holds the same parameters.
    flat = torch.cat([p.detach().flatten() for p in net.parameters()])
    ref = from_rank0(flat.clone())
    assert torch.equal(flat, ref), "ranks diverged"
    if hook is not None:
        hook.close()
    elif a.mode == "dataparallel":
        model.close()
    if comm is not None:
        comm.close()
    if dist.is_initialized():
        dist.destroy_process_group()
    return 0


if __name__ == "__main__":
    sys.exit(main())
