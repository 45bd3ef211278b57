"""python -m braid.torch.info: braid's torch.distributed backend as torch sees it.

Prints the registration (name, creator, devices), the versions of braid and torch, and, with
--probe, creates a one-rank "braid" process group over a HashStore and prints its
communicator's hosts, transport setting (BRAID_TRANSPORT), cost model and algorithms per
collective (no network, no other rank).
Under torchrun (WORLD_SIZE set) --probe joins the job's group instead (every rank must run it).
"""

import argparse
import datetime
import json
import os
import sys

_COLLECTIVES = ["all_reduce", "reduce_scatter", "all_gather", "broadcast", "reduce",
                "all_to_all", "barrier"]


def describe(comm):
    """A dict of what one communicator runs: ranks, hosts, timeout, algorithms and the
    algorithm picked for a few sizes per collective, and the selector's model."""
    c = comm.handle
    transport = os.environ.get("BRAID_TRANSPORT") or "auto"
    if transport == "auto":
        transport = "auto (shm within a host, tcp across hosts)"
    out = {"rank": comm.rank, "size": comm.size, "local_size": comm.local_size,
           "transport": transport,
           "num_hosts": comm.num_hosts, "timeout_ms": c.timeout_ms,
           "model": c.selector_model(), "algorithms": {}}
    for i, name in enumerate(_COLLECTIVES):
        algos = c.algorithms(i)
        picks = {str(b): c.algorithm_for(i, b) for b in (1 << 10, 1 << 20, 64 << 20)} \
            if algos else {}
        out["algorithms"][name] = {"available": algos, "chosen_for_bytes": picks}
    return out


def main(argv=None):
    ap = argparse.ArgumentParser(prog="python -m braid.torch.info", description=__doc__,
                                 formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--probe", action="store_true",
                    help="create a braid process group and describe its communicator")
    ap.add_argument("--json", action="store_true", help="one JSON object instead of text")
    args = ap.parse_args(argv)

    import torch
    import torch.distributed as dist

    import braid
    import braid.torch as bt

    info = {"backend": "braid", "braid": braid.__version__, "torch": torch.__version__,
            "codecs": braid.CODECS, "registration": bt.registration()}
    if args.probe:
        if "WORLD_SIZE" in os.environ:
            dist.init_process_group("braid")
        else:
            dist.init_process_group("braid", store=dist.HashStore(), rank=0, world_size=1,
                                    timeout=datetime.timedelta(seconds=60))
        pg = dist.distributed_c10d._get_default_group()
        info["group"] = {"backend": str(dist.get_backend()), "class": type(pg).__name__}
        info["communicator"] = describe(pg.comm)
        dist.destroy_process_group()
    if args.json:
        print(json.dumps(info, indent=1))
        return 0
    reg = info["registration"]
    print(f"braid {info['braid']} torch.distributed backend \"braid\" "
          f"({'registered' if reg['registered'] else 'NOT registered'}; creator "
          f"{reg['creator']}, devices {reg['devices'] or 'cpu (torch < 2.0: no device map)'})")
    print(f"torch {info['torch']}; codecs through braid.torch.ddp_hook: "
          f"{', '.join(info['codecs']) or 'none (built without compression/)'}")
    if "communicator" in info:
        c = info["communicator"]
        print(f"group: rank {c['rank']} of {c['size']}, {c['num_hosts']} host(s), "
              f"{c['local_size']} rank(s) here, transport {c['transport']}, every wait "
              f"bounded by {c['timeout_ms']} ms")
        print(f"model: {c['model']}")
        for name, a in c["algorithms"].items():
            picks = ", ".join(f"{int(b) >> 10} KiB: {n}" for b, n in
                              a["chosen_for_bytes"].items())
            print(f"  {name:15s} {', '.join(a['available']) or '-'}"
                  + (f"   (chosen: {picks})" if picks else ""))
    else:
        print("(--probe: create a group and show its communicator's algorithms)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
