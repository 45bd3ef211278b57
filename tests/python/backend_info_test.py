"""python -m braid.torch.info: the registration is reported, --probe creates a one-rank braid
group and lists algorithms for every collective, and --json is machine-readable.
Exit 77 (skip) without torch or the braid module."""

import json
import subprocess
import sys


def main():
    try:
        import torch  # noqa: F401
        import braid.torch  # noqa: F401
    except ImportError as e:
        print(f"SKIP: {e}")
        return 77
    out = subprocess.run([sys.executable, "-m", "braid.torch.info", "--probe", "--json"],
                         capture_output=True, text=True, timeout=120)
    if out.returncode != 0:
        print(out.stdout, out.stderr)
        return 1
    info = json.loads(out.stdout)
    assert info["registration"]["registered"], info["registration"]
    assert info["group"]["class"] == "ProcessGroupBraid", info["group"]
    algos = info["communicator"]["algorithms"]
    assert set(algos) == {"all_reduce", "reduce_scatter", "all_gather", "broadcast", "reduce",
                          "all_to_all", "barrier"}, algos
    assert all(a["available"] for a in algos.values()), algos
    text = subprocess.run([sys.executable, "-m", "braid.torch.info"], capture_output=True,
                          text=True, timeout=120)
    assert text.returncode == 0 and '"braid" (registered' in text.stdout, text.stdout
    print(text.stdout.strip())
    print("PASS: braid.torch.info")
    return 0


if __name__ == "__main__":
    sys.exit(main())
