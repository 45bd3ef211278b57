#!/usr/bin/env python3
"""braid-chaos: injects faults into running braid jobs by the hundred and checks what survives.

Each injection starts a job of 2-8 ranks of braid-chaos-worker (random verified collectives and
Bucketer jobs, every rank deriving the same sequence from the injection's seed) over one transport,
and strikes once at a random moment with one fault:

  kill       kill -9 of one rank
  stop       SIGSTOP of one rank (it stalls; SIGCONT once the others have failed)
  exit       a rank calls exit(0) with an all-reduce in flight
  sockclose  a rank shuts down every socket it holds in the middle of an all-reduce (tcp, fabric)
  link       the link of one emulated host goes down (ip link set fab0 down; fabric only)
  shmfull    /dev/shm has no room: the intra-host segment cannot be made (shm only)

What the fault strikes (fault_op, in the JSON plan and on each progress line; --fault-ops): in
half of the injections a collective (the exit and sockclose faults: a long all-reduce), in the
other half a Bucketer: every rank runs a long Bucketer job (several steps of random gradients
marked ready in a random order) at the fault's op, and the fault hits its finalize or its in-flight
bucket reductions (the exit and sockclose faults: with the first half of a step's gradients marked
ready, in backward's order). shmfull strikes the communicator's creation. Random ops of every job
include Bucketer jobs too. The table's "bucket" column counts the injections whose fault struck a
Bucketer job, "b_err" those in which some survivor's error came from a Bucketer job.

Transports: shm (one host: the shared segment and shm rings), tcp (BRAID_TRANSPORT=tcp on one
host), fabric (2-4 emulated hosts, scripts/fabric.sh network namespaces, tcp between them).

For every injection it checks, and counts as a failure otherwise:
  - every survivor returns an error (no_error) within BRAID_TIMEOUT_MS + 2 s (--slack-ms) of the
    fault (late) that names the culprit rank (unnamed): for a link, a rank on the other side of
    the cut, seen from both sides; for shmfull, /dev/shm;
  - no process hangs (hang: still alive 5 s after that deadline; killed) and none crashes (crash);
  - nothing leaks: each survivor has as many open fds after destroying its communicator as before
    creating it (fd_leak); no process of the job is left (proc_leak); /dev/shm, private to the
    run, is empty (shm_leak); no network namespace is left (netns_leak). Ports are the fds of
    processes that are gone or were counted;
  - every collective and every Bucketer step that reported success produced the right result
    (wrong).

The run happens in a private mount namespace (unshare -m) with a fresh tmpfs on /dev/shm per
job, so the shm checks see only this job's objects and `shmfull` fills nothing outside it. It
needs root (namespaces); without it, it exits 77.

Seeds: injection i of --seed S uses seed S*100003+i; `--replay SEED` runs that one injection
again (same transport, ranks, fault, victim and moment) and prints its reports.
"""
import argparse
import collections
import json
import os
import random
import re
import shutil
import signal
import subprocess
import sys
import tempfile
import time

FAULTS = ("kill", "stop", "exit", "sockclose", "link", "shmfull")
FAULT_OPS = ("collective", "bucketer")
TRANSPORTS = ("shm", "tcp", "fabric")
COMPATIBLE = {
    "kill": TRANSPORTS, "stop": TRANSPORTS, "exit": TRANSPORTS,
    "sockclose": ("tcp", "fabric"), "link": ("fabric",), "shmfull": ("shm",),
}
SKIP = 77
GRACE_S = 5.0  # after the deadline, before a live process counts as a hang
MARKER = "BRAID_CHAOS_JOB"
# scripts/fabric.sh of the source tree this copy was configured from (CMake fills it in).
CONFIGURED_FABRIC = "@PROJECT_SOURCE_DIR@/scripts/fabric.sh"


def plan_for(seed, faults, transports, max_ranks, fault_ops=FAULT_OPS):
    rng = random.Random(seed)
    pairs = [(f, t) for f in faults for t in transports if t in COMPATIBLE[f]]
    fault, transport = pairs[rng.randrange(len(pairs))]
    hosts, per_host = 1, rng.randint(2, max_ranks)
    if transport == "fabric":
        hosts = rng.randint(2, min(4, max_ranks))
        per_host = rng.randint(1, max(1, min(2, max_ranks // hosts)))
    ranks = hosts * per_host
    victim = rng.randrange(ranks)
    plan = {
        "seed": seed, "fault": fault, "transport": transport, "hosts": hosts,
        "per_host": per_host, "ranks": ranks, "victim": victim,
        "victim_host": victim // per_host, "fault_at": rng.randint(0, 25),
        "delay_ms": rng.randint(0, 40),
    }
    # Drawn last, so that a seed's other choices are what they were before the Bucketer mode.
    op = FAULT_OPS[rng.random() < 0.5] if len(fault_ops) > 1 else fault_ops[0]
    plan["fault_op"] = "create" if fault == "shmfull" else op
    return plan


def read_report(path):
    rep = {"ops": 0, "wrong": [], "error": None, "inject_ns": None, "kind": None}
    try:
        with open(path) as f:
            lines = f.read().splitlines()
    except OSError:
        return rep
    for line in lines:
        word, _, rest = line.partition(" ")
        if word == "pid":
            rep["pid"] = int(rest)
        elif word == "fds":
            rep["fds"] = int(rest)
        elif word == "fds_after":
            rep["fds_after"] = int(rest)
        elif word == "op":
            parts = rest.split()
            rep["ops"] = int(parts[0]) + 1
            rep["kind"] = parts[1] if len(parts) > 1 else None
            rep["op_ns"] = int(parts[2]) if len(parts) > 2 else None
        elif word == "wrong":
            rep["wrong"].append(rest)
        elif word == "inject":
            rep["inject_ns"] = int(rest.split()[0])
        elif word == "done":
            rep["done"] = int(rest)
        elif word == "error":
            j, t, code, msg = (rest.split(" ", 3) + ["", "", "", ""])[:4]
            # The kind of the op that failed (none: creating the communicator failed).
            kind = rep["kind"] if int(j) == rep["ops"] - 1 else None
            rep["error"] = {"op": int(j), "kind": kind, "ns": int(t), "code": int(code),
                            "message": msg,
                            "op_ns": rep.get("op_ns") if int(j) == rep["ops"] - 1 else None}
    return rep


def job_pids(tag):
    """Processes whose environment carries this job's marker."""
    found = []
    needle = ("%s=%s" % (MARKER, tag)).encode()
    for d in os.listdir("/proc"):
        if not d.isdigit() or int(d) == os.getpid():
            continue
        try:
            with open("/proc/%s/environ" % d, "rb") as f:
                if needle in f.read().split(b"\0"):
                    found.append(int(d))
        except OSError:
            pass
    return found


class Job:
    def __init__(self, args, plan, work):
        self.args, self.plan, self.work = args, plan, work
        self.tag = "%d-%d" % (os.getpid(), plan["seed"])
        self.procs = []
        self.fabric_id = None

    def report_path(self, r):
        return os.path.join(self.work, "rank%d.txt" % r)

    def worker_args(self):
        p = self.plan
        a = [self.args.worker, "--seed", str(p["seed"]), "--max-bytes", str(self.args.max_bytes),
             "--report", os.path.join(self.work, "rank%r.txt")]
        if p["fault"] in ("exit", "sockclose"):
            a += ["--victim", str(p["victim"]), "--self-fault", p["fault"]]
        if p["fault"] in ("exit", "sockclose") or p["fault_op"] == "bucketer":
            a += ["--fault-at", str(p["fault_at"]), "--fault-op", p["fault_op"]]
        return a

    def env(self):
        e = dict(os.environ)
        for k in list(e):
            if k.startswith("BRAID_") or k in ("RANK", "WORLD_SIZE", "LOCAL_RANK",
                                               "LOCAL_WORLD_SIZE", "MASTER_ADDR", "MASTER_PORT"):
                del e[k]
        e[MARKER] = self.tag
        e["BRAID_TIMEOUT_MS"] = str(self.args.timeout_ms)
        e["BRAID_CALIBRATION"] = self.args.calibration
        e["BRAID_CALIBRATION_CACHE"] = os.path.join(self.args.cache_dir, "calibration")
        e["BRAID_TRANSPORT"] = "tcp" if self.plan["transport"] == "tcp" else "auto"
        if self.plan["fault"] == "exit":
            # In an ASan build the victim's exit() runs LeakSanitizer's pass first, with the
            # in-flight all-reduce's buffers to scan and its sockets still open: once it outlasted
            # the survivors' BRAID_TIMEOUT_MS, which saw a silent peer where one had left. A
            # process that exits mid-collective leaks by design; no other build reads this.
            asan = e.get("ASAN_OPTIONS", "")
            e["ASAN_OPTIONS"] = (asan + ":" if asan else "") + "detect_leaks=0"
        return e

    def start(self):
        p, env = self.plan, self.env()
        if p["transport"] == "fabric":
            cmd = [self.args.fabric, "run", "--hosts", str(p["hosts"]), "--ranks-per-host",
                   str(p["per_host"]), "--store", "file", "--timeout",
                   str(int(self.args.timeout_ms / 1000) + 120)]
            for k in (MARKER, "BRAID_TIMEOUT_MS", "BRAID_CALIBRATION", "BRAID_CALIBRATION_CACHE",
                      "BRAID_TRANSPORT"):
                cmd += ["--env", "%s=%s" % (k, env[k])]
            proc = subprocess.Popen(cmd + ["--"] + self.worker_args(), env=env,
                                    stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
            self.procs = [proc]
            self.fabric_id = "braidfab-%d" % proc.pid
            return
        store = os.path.join(self.work, "store")
        os.mkdir(store)
        for r in range(p["ranks"]):
            e = dict(env, RANK=str(r), WORLD_SIZE=str(p["ranks"]), LOCAL_RANK=str(r),
                     LOCAL_WORLD_SIZE=str(p["ranks"]), BRAID_FILE_STORE=store)
            err = open(os.path.join(self.work, "rank%d.err" % r), "w")
            self.procs.append(subprocess.Popen(self.worker_args(), env=e, stdout=err, stderr=err))
            err.close()

    def alive(self):
        return [q for q in self.procs if q.poll() is None]

    def victim_pid(self, deadline):
        path = self.report_path(self.plan["victim"])
        while time.monotonic() < deadline:
            pid = read_report(path).get("pid")
            if pid:
                return pid
            time.sleep(0.005)
        return None

    def wait_for_op(self, deadline):
        """Waits until the victim has started op fault_at (or stopped issuing)."""
        path = self.report_path(self.plan["victim"])
        while time.monotonic() < deadline:
            rep = read_report(path)
            if rep["ops"] > self.plan["fault_at"] or rep["error"] or "done" in rep:
                return True
            if not self.alive():
                return False
            time.sleep(0.002)
        return False

    def link_down(self):
        ns = "%s-h%d" % (self.fabric_id, self.plan["victim_host"] + 1)
        subprocess.run(["ip", "-n", ns, "link", "set", "fab0", "down"], check=False,
                       stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)

    def kill_all(self):
        for pid in job_pids(self.tag):
            try:
                os.kill(pid, signal.SIGKILL)
            except OSError:
                pass
        for q in self.procs:
            try:
                q.kill()
            except OSError:
                pass
            q.wait()


def mount_shm(size):
    subprocess.run(["mount", "-t", "tmpfs", "-o", "size=%s,mode=1777" % size, "braid-chaos",
                    "/dev/shm"], check=True)


def umount_shm():
    subprocess.run(["umount", "/dev/shm"], check=False)


def run_injection(args, plan):
    """Runs one injection; returns (problems, details)."""
    work = tempfile.mkdtemp(prefix="braid-chaos-", dir=args.cache_dir)
    job = Job(args, plan, work)
    fault = plan["fault"]
    problems = []
    timeout_s = args.timeout_ms / 1000.0
    mount_shm("16k" if fault == "shmfull" else "4g")
    try:
        start_ns = time.monotonic_ns()
        job.start()
        boot_deadline = time.monotonic() + 60 + timeout_s
        inject_ns = None
        victim_pid = None
        if fault in ("kill", "stop", "link"):
            victim_pid = job.victim_pid(boot_deadline)
            if job.wait_for_op(boot_deadline):
                time.sleep(plan["delay_ms"] / 1000.0)
                if fault == "link":
                    job.link_down()
                elif victim_pid:
                    os.kill(victim_pid, signal.SIGKILL if fault == "kill" else signal.SIGSTOP)
                inject_ns = time.monotonic_ns()
            else:
                problems.append("not_reached")
        elif fault == "shmfull":
            inject_ns = start_ns
        # The deadline every survivor must meet, then the grace before a live process is a hang.
        ranks = plan["ranks"]
        victims = set() if fault in ("link", "shmfull") else {plan["victim"]}
        survivors = [r for r in range(ranks) if r not in victims]
        limit = time.monotonic() + (60 + timeout_s if inject_ns is None else timeout_s + 2) + GRACE_S
        continued = False
        while time.monotonic() < limit and job.alive():
            if fault == "stop" and not continued:
                reps = [read_report(job.report_path(r)) for r in survivors]
                if all(rep["error"] or "done" in rep for rep in reps):
                    os.kill(victim_pid, signal.SIGCONT)
                    continued = True
                    limit = time.monotonic() + timeout_s + 2 + GRACE_S
            time.sleep(0.01)
        if fault == "stop" and victim_pid and not continued:
            try:
                os.kill(victim_pid, signal.SIGCONT)
            except OSError:
                pass
            limit = time.monotonic() + timeout_s + 2 + GRACE_S
            while time.monotonic() < limit and job.alive():
                time.sleep(0.01)
        if job.alive() or job_pids(job.tag):
            problems.append("hang")
            job.kill_all()
        for q in job.procs:
            q.wait()
        reps = {r: read_report(job.report_path(r)) for r in range(ranks)}
        if inject_ns is None and fault in ("exit", "sockclose"):
            inject_ns = reps[plan["victim"]]["inject_ns"]
            if inject_ns is None:
                problems.append("not_reached")
        worst_ns = 0  # the last survivor's error, after the fault
        for r in range(ranks):
            rep = reps[r]
            if rep["wrong"]:
                problems.append("wrong")
            if r in victims:
                continue
            err = rep["error"]
            if err is None:
                problems.append("no_error")
                continue
            if inject_ns is not None:
                worst_ns = max(worst_ns, err["ns"] - inject_ns)
                if err["ns"] - inject_ns > (args.timeout_ms + args.slack_ms) * 1e6:
                    problems.append("late")
            if not names_culprit(plan, r, err["message"]):
                problems.append("unnamed")
            if rep.get("fds_after") is None:
                problems.append("crash")
            elif rep.get("fds") is not None and rep["fds_after"] != rep["fds"]:
                problems.append("fd_leak")
        if fault == "stop" and plan["victim"] in reps:
            rep = reps[plan["victim"]]
            if rep.get("fds_after") is not None and rep.get("fds") is not None and \
                    rep["fds_after"] != rep["fds"]:
                problems.append("fd_leak")
        if job_pids(job.tag):
            problems.append("proc_leak")
            job.kill_all()
        left = [n for n in os.listdir("/dev/shm")]
        if left:
            problems.append("shm_leak")
        if job.fabric_id:
            out = subprocess.run(["ip", "netns", "list"], capture_output=True, text=True).stdout
            if job.fabric_id + "-" in out:
                problems.append("netns_leak")
        bucketer_errors = [r for r in survivors
                           if reps[r]["error"] and reps[r]["error"]["kind"] == "bucketer"]
        details = {"plan": plan, "problems": sorted(set(problems)), "shm_left": left,
                   "inject_ns": inject_ns, "reports": reps, "bucketer_errors": bucketer_errors,
                   "last_error_s": round(worst_ns * 1e-9, 2) if inject_ns is not None else None}
        return sorted(set(problems)), details
    finally:
        job.kill_all()
        umount_shm()
        if args.keep and problems:
            print("kept %s" % work, file=sys.stderr)
        else:
            shutil.rmtree(work, ignore_errors=True)


def names_culprit(plan, rank, message):
    fault = plan["fault"]
    if fault == "shmfull":
        return "/dev/shm" in message
    mentioned = {int(m) for m in re.findall(r"\brank (\d+)", message)}
    mentioned.discard(rank)  # "rank 3: ..." is the reporter
    if fault == "link":
        h = plan["victim_host"]
        side = set(range(h * plan["per_host"], (h + 1) * plan["per_host"]))
        return bool(mentioned - side) if rank in side else bool(mentioned & side)
    return plan["victim"] in mentioned


def print_table(results, out):
    kinds = ["ok", "late", "no_error", "unnamed", "hang", "crash", "wrong", "fd_leak",
             "proc_leak", "shm_leak", "netns_leak", "not_reached", "bucket", "b_err"]
    cells = collections.defaultdict(collections.Counter)
    for plan, problems, details in results:
        key = (plan["fault"], plan["transport"])
        cells[key]["runs"] += 1
        if not problems:
            cells[key]["ok"] += 1
        for p in problems:
            cells[key][p] += 1
        cells[key]["bucket"] += plan["fault_op"] == "bucketer"
        cells[key]["b_err"] += bool(details["bucketer_errors"])
    head = "%-10s %-7s %5s " % ("fault", "transp.", "runs") + " ".join("%6s" % k[:6] for k in kinds)
    print(head, file=out)
    for key in sorted(cells):
        c = cells[key]
        print("%-10s %-7s %5d " % (key[0], key[1], c["runs"]) +
              " ".join("%6d" % c[k] for k in kinds), file=out)
    total = collections.Counter()
    for c in cells.values():
        total.update(c)
    print("%-10s %-7s %5d " % ("all", "", total["runs"]) +
          " ".join("%6d" % total[k] for k in kinds), file=out)


def in_private_mounts(argv):
    """Re-executes under unshare -m (a private /dev/shm per job) unless already there."""
    if os.environ.get("BRAID_CHAOS_INNER") == "1":
        return None
    if os.geteuid() != 0 or shutil.which("unshare") is None:
        print("braid-chaos: needs root and unshare (mount and network namespaces); skipped",
              file=sys.stderr)
        return SKIP
    env = dict(os.environ, BRAID_CHAOS_INNER="1")
    return subprocess.call(["unshare", "--mount", "--propagation", "private", sys.executable,
                            os.path.abspath(__file__)] + argv, env=env)


def main(argv):
    here = os.path.dirname(os.path.abspath(__file__))
    ap = argparse.ArgumentParser(
        prog="braid-chaos", formatter_class=argparse.RawDescriptionHelpFormatter,
        description=__doc__.split("\n\n")[0],
        epilog="\n\n".join(__doc__.split("\n\n")[1:]))
    ap.add_argument("-n", "--injections", type=int, default=20, help="injections (default 20)")
    ap.add_argument("--seed", type=int, default=1, help="base seed (default 1)")
    ap.add_argument("--replay", type=int, help="run the one injection of this seed, verbosely")
    ap.add_argument("--faults", default=",".join(FAULTS), help="comma list (default: all)")
    ap.add_argument("--transports", default=",".join(TRANSPORTS), help="comma list (default: all)")
    ap.add_argument("--fault-ops", default=",".join(FAULT_OPS),
                    help="what the fault strikes, comma list of collective, bucketer (default: "
                         "both, half of the injections each)")
    ap.add_argument("--max-ranks", type=int, default=8, help="largest job (default 8)")
    ap.add_argument("--max-bytes", type=int, default=64 << 20,
                    help="largest collective buffer per rank (default 64 MiB)")
    ap.add_argument("--timeout-ms", type=int, default=3000,
                    help="BRAID_TIMEOUT_MS of the jobs (default 3000)")
    ap.add_argument("--slack-ms", type=int, default=2000,
                    help="allowed beyond BRAID_TIMEOUT_MS for a survivor's error (default 2000)")
    ap.add_argument("--calibration", default="off", choices=("off", "auto"),
                    help="BRAID_CALIBRATION of the jobs (default off: no probe per job)")
    ap.add_argument("--worker", default=os.path.join(here, "braid-chaos-worker"))
    fabric = CONFIGURED_FABRIC if not CONFIGURED_FABRIC.startswith("@") else \
        os.path.join(here, "..", "..", "scripts", "fabric.sh")
    ap.add_argument("--fabric", default=fabric,
                    help="scripts/fabric.sh (for the fabric transport)")
    ap.add_argument("--json", help="write one JSON object per injection to this file")
    ap.add_argument("--keep", action="store_true", help="keep the reports of failed injections")
    ap.add_argument("--fail-fast", action="store_true", help="stop at the first failed injection")
    args = ap.parse_args(argv)
    faults = [f for f in args.faults.split(",") if f]
    transports = [t for t in args.transports.split(",") if t]
    fault_ops = tuple(o for o in FAULT_OPS if o in args.fault_ops.split(","))
    bad = [f for f in faults if f not in FAULTS] + [t for t in transports if t not in TRANSPORTS] + \
        [o for o in args.fault_ops.split(",") if o not in FAULT_OPS]
    if bad or not fault_ops or not any(t in COMPATIBLE[f] for f in faults for t in transports):
        ap.error("unknown or incompatible faults/transports/fault ops: %s" %
                 (",".join(bad) or args.faults))
    if not os.access(args.worker, os.X_OK):
        ap.error("no worker at %s (--worker)" % args.worker)
    if "fabric" in transports and not os.access(args.fabric, os.X_OK):
        ap.error("no fabric.sh at %s (--fabric)" % args.fabric)
    rc = in_private_mounts(argv)
    if rc is not None:
        return rc
    args.cache_dir = tempfile.mkdtemp(prefix="braid-chaos-run-")
    seeds = [args.replay] if args.replay is not None else \
        [args.seed * 100003 + i for i in range(args.injections)]
    results, failed = [], 0
    jf = open(args.json, "w") if args.json else None
    started = time.monotonic()
    try:
        for i, seed in enumerate(seeds):
            plan = plan_for(seed, faults, transports, args.max_ranks, fault_ops)
            t0 = time.monotonic()
            problems, details = run_injection(args, plan)
            details["seconds"] = round(time.monotonic() - t0, 2)
            results.append((plan, problems, details))
            failed += bool(problems)
            line = "%4d seed %-9d %-9s %-6s %d rank(s) on %d host(s), victim %d at op %d (%s): %s " \
                "(%.1f s)" % (i, seed, plan["fault"], plan["transport"], plan["ranks"],
                              plan["hosts"], plan["victim"], plan["fault_at"], plan["fault_op"],
                              ",".join(problems) or "ok", details["seconds"])
            if details.get("last_error_s"):
                line += ", last error %.1f s after the fault" % details["last_error_s"]
            print(line, flush=True)
            if args.replay is not None or problems:
                for r, rep in sorted(details["reports"].items()):
                    err = rep["error"]
                    print("     rank %d: ops %d, %s%s" % (
                        r, rep["ops"], "error at op %d (%s): %s" % (
                            err["op"], err["kind"] or "create", err["message"])
                        if err else ("done" if "done" in rep else "no error"),
                        ", wrong %s" % rep["wrong"] if rep["wrong"] else ""))
                if details["shm_left"]:
                    print("     /dev/shm left: %s" % " ".join(details["shm_left"]))
            if jf:
                jf.write(json.dumps(details) + "\n")
            if problems and args.fail_fast:
                break
    finally:
        if jf:
            jf.close()
        # The kept reports live under the run's directory: leave it for them.
        if not (args.keep and failed):
            shutil.rmtree(args.cache_dir, ignore_errors=True)
    print("\n# braid-chaos: %d injection(s), %d failed, %.0f s; BRAID_TIMEOUT_MS=%d" % (
        len(results), failed, time.monotonic() - started, args.timeout_ms))
    print_table(results, sys.stdout)
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
