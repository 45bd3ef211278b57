"""The equivalence check under a real torchrun (2 workers), in its two rendezvous modes:

  static (--master_addr/--master_port): torchrun's agent serves torch's c10d store on
      MASTER_PORT for the whole run, so braid's bootstrap must move to MASTER_PORT + 1;
  --standalone (c10d rendezvous): worker 0's init_process_group binds MASTER_PORT, which torchrun
      picks itself; braid's store gets BRAID_STORE_PORT, a port found free here (MASTER_PORT + 1
      is whatever port follows torchrun's, and in a parallel test run another test's
      connection held it once: "bind to 127.0.0.1:P+1 ... in use").

Exit 77 (skip) without torch/torchrun or the braid module.
"""

import os
import subprocess
import sys

from ports import free_port

HERE = os.path.dirname(os.path.abspath(__file__))


def main():
    try:
        import torch  # noqa: F401
        import torch.distributed.run  # noqa: F401
        import braid  # noqa: F401
    except ImportError as e:
        print(f"SKIP: {e}")
        return 77
    worker = os.path.join(HERE, "equivalence_worker.py")
    # torch 1.13's elastic agent with Python 3.11 needs --redirects/--tee (its default
    # stdout handling fails there).
    common = [sys.executable, "-m", "torch.distributed.run", "--nproc_per_node", "2",
              "--redirects", "1", "--tee", "1", "--monitor_interval", "1"]
    runs = {
        "static": common + ["--nnodes", "1", "--master_addr", "127.0.0.1", "--master_port",
                            str(free_port(2))],
        "standalone": common + ["--standalone"],
    }
    env = dict(os.environ, OMP_NUM_THREADS="1",
               BRAID_TIMEOUT_MS=os.environ.get("BRAID_TIMEOUT_MS", "20000"))
    env.pop("BRAID_STORE_PORT", None)
    envs = {"static": env, "standalone": dict(env, BRAID_STORE_PORT=str(free_port(2)))}
    # Both launches at once (each is mostly waiting in torchrun's rendezvous and imports).
    procs = {}
    for name, cmd in runs.items():
        cmd = cmd + [worker, "--variants", "plain", "--steps", "4"]
        procs[name] = subprocess.Popen(cmd, env=envs[name], stdout=subprocess.PIPE,
                                       stderr=subprocess.STDOUT, text=True)
    rc = 0
    for name, p in procs.items():
        try:
            out, _ = p.communicate(timeout=150)
        except subprocess.TimeoutExpired:
            p.kill()
            out, _ = p.communicate()
            print(f"torchrun {name}: still running after 150 s")
        lines = [l for l in out.splitlines() if "rank" in l or "Error" in l]
        print(f"--- torchrun {name}: exit {p.returncode}\n" + "\n".join(lines))
        if p.returncode != 0 or out.count("bit-identical") != 2:
            print(out[-4000:])
            rc = 1
    return rc


if __name__ == "__main__":
    sys.exit(main())
