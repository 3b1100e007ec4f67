#!/usr/bin/env python3
"""A wide-area link's propagation delay where the kernel has no netem (strata-cluster --wan-delay).

Joins the given persistent TAP devices (one per site, each on its site's bridge) as a hub: every
frame read from one is written to all the others 2 x DELAY later, in arrival order: DELAY is per
uplink, as with netem on both sites' uplinks, and a frame between two sites crosses two. Run inside the
switch namespace; tbf on each TAP's egress shapes what leaves the site. Ends on SIGTERM.

    wan_delay_line.py DELAY TAP0 TAP1 [TAP2 ...]      (DELAY in tc syntax: 50ms, 0.05s, 50000us)
"""
import collections
import fcntl
import os
import select
import signal
import struct
import sys
import time

TUNSETIFF = 0x400454CA
IFF_TAP, IFF_NO_PI = 0x0002, 0x1000


def seconds(text):
    for suffix, scale in (("usec", 1e-6), ("us", 1e-6), ("msec", 1e-3), ("ms", 1e-3),
                          ("sec", 1.0), ("s", 1.0)):
        if text.endswith(suffix):
            return float(text[: -len(suffix)]) * scale
    return float(text) * 1e-6  # tc's default unit is microseconds


def open_tap(name):
    fd = os.open("/dev/net/tun", os.O_RDWR | os.O_NONBLOCK)
    fcntl.ioctl(fd, TUNSETIFF, struct.pack("16sH", name.encode(), IFF_TAP | IFF_NO_PI))
    return fd


def main():
    if len(sys.argv) < 4:
        sys.exit(__doc__)
    delay = 2 * seconds(sys.argv[1])
    taps = [open_tap(name) for name in sys.argv[2:]]
    queues = {fd: collections.deque() for fd in taps}  # frames due on fd: (due time, bytes)
    poller = select.epoll()
    for fd in taps:
        poller.register(fd, select.EPOLLIN)
    signal.signal(signal.SIGTERM, lambda *_: sys.exit(0))
    while True:
        now = time.monotonic()
        for fd, q in queues.items():
            while q and q[0][0] <= now:
                try:
                    os.write(fd, q.popleft()[1])
                except BlockingIOError:  # the kernel's queue is full: as a link would, drop
                    pass
        due = min((q[0][0] for q in queues.values() if q), default=None)
        timeout = -1 if due is None else max(0.0, due - time.monotonic())
        for fd, _ in poller.poll(timeout):
            arrived = time.monotonic() + delay
            while True:
                try:
                    frame = os.read(fd, 65536)
                except BlockingIOError:
                    break
                for other in taps:
                    if other != fd:
                        queues[other].append((arrived, frame))


if __name__ == "__main__":
    main()
