"""Ports for the tests' stores: free now, and outside the kernel's ephemeral range.

A port the kernel hands out for bind(port 0) lies in net.ipv4.ip_local_port_range (32768-60999
by default), the same range it draws from for every outgoing connection's source port. Under
`ctest -j2` a test running beside this one opens such connections all the time, so a port that
was free when it was chosen could be taken before torch's TCPStore binds it (seen twice: errno 98
on MASTER_PORT). A port below the range is only ever taken by an explicit bind.

    python3 ports.py [SPAN]   prints a base port whose SPAN consecutive ports are free
"""

import random
import socket
import sys

LOW, HIGH = 20000, 32000  # below the default ephemeral range


def _range_start():
    try:
        with open("/proc/sys/net/ipv4/ip_local_port_range") as f:
            return int(f.read().split()[0])
    except (OSError, ValueError, IndexError):
        return 32768


def _bindable(port):
    # torch's TCPStore listens on [::] and on 0.0.0.0: both must be free.
    for family, host in ((socket.AF_INET6, "::"), (socket.AF_INET, "0.0.0.0")):
        try:
            s = socket.socket(family)
        except OSError:
            continue  # no IPv6 here: nothing to collide with
        try:
            if family == socket.AF_INET6:
                s.setsockopt(socket.IPPROTO_IPV6, socket.IPV6_V6ONLY, 1)
            s.bind((host, port))
        except OSError:
            return False
        finally:
            s.close()
    return True


def free_port(span=1):
    """A base port p such that p .. p+span-1 are free now and below the ephemeral range."""
    high = min(HIGH, _range_start()) - span
    if high <= LOW:
        raise RuntimeError(f"no room below the ephemeral range for {span} ports")
    for _ in range(500):
        base = random.randrange(LOW, high)
        if all(_bindable(base + k) for k in range(span)):
            return base
    raise RuntimeError(f"no {span} consecutive free ports in {LOW}-{high + span}")


if __name__ == "__main__":
    print(free_port(int(sys.argv[1]) if len(sys.argv) > 1 else 1))
