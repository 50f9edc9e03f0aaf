"""Keeps the sockets a process hands over open until it is killed (tests/hang/hang_job.py's
``gone`` scenario): serves one unix socket at argv[1], receives file descriptors, acknowledges."""

import socket
import sys
import time

held = []
with socket.socket(socket.AF_UNIX, socket.SOCK_STREAM) as server:
    server.bind(sys.argv[1])
    server.listen(4)
    while True:
        conn, _ = server.accept()
        _, fds, _, _ = socket.recv_fds(conn, 16, 1024)
        held.append((conn, fds))
        conn.sendall(b"k")
        time.sleep(0.01)
