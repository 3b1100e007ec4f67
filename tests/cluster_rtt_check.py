#!/usr/bin/env python3
"""Under strata-cluster with 2 single-rank nodes: rank 1 measures the TCP round trip to rank 0
five times and checks the least against the expected one, EXPECT_MS to EXPECT_MS + 40 ms (the
wide-area delay applied, and no more than scheduling adds).   cluster_rtt_check.py EXPECT_MS"""
import os
import socket
import sys
import time

expect = float(sys.argv[1])
rank = int(os.environ["OMPI_COMM_WORLD_RANK"])
host = os.environ.get("STRATA_TEST_HOST0", "10.213.0.1")
if rank == 0:
    s = socket.socket()
    s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    s.bind((host, 5599))
    s.listen(1)
    s.settimeout(60)
    c, _ = s.accept()
    for _ in range(5):
        c.sendall(c.recv(1))
    sys.exit(0)
deadline = time.monotonic() + 60
while True:
    try:
        c = socket.create_connection((host, 5599), timeout=5)
        break
    except OSError:
        if time.monotonic() > deadline:
            sys.exit("rank 1: cannot reach rank 0")
        time.sleep(0.2)
c.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
rtts = []
for _ in range(5):
    t = time.monotonic()
    c.sendall(b"x")
    c.recv(1)
    rtts.append(1e3 * (time.monotonic() - t))
best = min(rtts)
print(f"round trips {', '.join(f'{r:.1f}' for r in rtts)} ms; expected {expect:.0f} ms")
sys.exit(0 if expect <= best <= expect + 40 else f"least round trip {best:.1f} ms, expected {expect} to {expect + 40}")
