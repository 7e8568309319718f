"""Packet agent run inside a network namespace with ``ip netns exec`` (the live lab test
and ``audit --kernel``).

``send PROBES_JSON``: open every probe at once (a TCP SYN or one UDP datagram) and print
{"id": local source port} as JSON: the kernel cross-check sees which of them the
destination's input hook accepted by their source port. ``listen PORTS``: accept TCP connections and echo UDP datagrams on 0.0.0.0 for every port
until killed. ``probe PROBES_JSON TIMEOUT_S``: fire every probe at once (non-blocking),
wait up to TIMEOUT_S, print {"id": "open" | "closed"} as JSON. A probe is
[id, proto, src_addr, dst_addr, port]. Probes run concurrently so a dropped SYN costs
the one shared timeout, not one timeout each.
"""

from __future__ import annotations

import contextlib
import errno
import json
import selectors
import socket
import sys
import time


def _socket_of(key: selectors.SelectorKey) -> socket.socket:
    """The socket behind a selector key: the selector hands back ``int | HasFileno``, but this
    agent registers nothing except sockets."""
    sock = key.fileobj
    if not isinstance(sock, socket.socket):
        raise TypeError(f"selector holds a {type(sock).__name__}, not a socket")
    return sock


def listen(ports: list[int]) -> None:
    sel = selectors.DefaultSelector()
    for port in ports:
        tcp = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
        tcp.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        tcp.bind(("0.0.0.0", port))
        tcp.listen(256)
        tcp.setblocking(False)
        sel.register(tcp, selectors.EVENT_READ, "tcp")
        udp = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
        udp.bind(("0.0.0.0", port))
        udp.setblocking(False)
        sel.register(udp, selectors.EVENT_READ, "udp")
    print("ready", flush=True)
    while True:
        for key, _ in sel.select():
            sock = _socket_of(key)
            try:
                if key.data == "tcp":
                    conn, _ = sock.accept()
                    conn.close()
                else:
                    data, peer = sock.recvfrom(64)
                    sock.sendto(data, peer)
            except OSError:
                pass


def probe(probes: list[list], timeout_s: float) -> dict[str, str]:
    sel = selectors.DefaultSelector()
    result = {p[0]: "closed" for p in probes}
    for pid, proto, src, dst, port in probes:
        kind = socket.SOCK_STREAM if proto == "tcp" else socket.SOCK_DGRAM
        sock = socket.socket(socket.AF_INET, kind)
        sock.setblocking(False)
        sock.bind((src, 0))
        if proto == "tcp":
            code = sock.connect_ex((dst, port))
            if code not in (0, errno.EINPROGRESS):
                sock.close()
                continue
            sel.register(sock, selectors.EVENT_WRITE, pid)
        else:
            sock.connect((dst, port))
            sock.send(pid.encode())
            sel.register(sock, selectors.EVENT_READ, pid)
    deadline = time.monotonic() + timeout_s
    while sel.get_map() and (left := deadline - time.monotonic()) > 0:
        for key, _ in sel.select(left):
            sock = _socket_of(key)
            sel.unregister(sock)
            try:
                if sock.type == socket.SOCK_STREAM:
                    if sock.getsockopt(socket.SOL_SOCKET, socket.SO_ERROR) == 0:
                        result[key.data] = "open"
                elif sock.recv(64) == key.data.encode():
                    result[key.data] = "open"
            except OSError:
                pass
            sock.close()
    return result


def send(probes: list[list], linger_s: float) -> dict[str, int]:
    """Fire every probe (one SYN or datagram each); keep the sockets open ``linger_s`` so
    that no two probes share a source port while the observer reads them."""
    socks = []
    ports: dict[str, int] = {}
    for pid, proto, src, dst, port in probes:
        sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM if proto == "tcp" else socket.SOCK_DGRAM)
        sock.setblocking(False)
        sock.bind((src, 0))
        ports[pid] = sock.getsockname()[1]
        if proto == "tcp":
            sock.connect_ex((dst, port))
        else:
            with contextlib.suppress(OSError):
                sock.sendto(pid.encode(), (dst, port))
        socks.append(sock)
    time.sleep(linger_s)
    for sock in socks:
        sock.close()
    return ports


if __name__ == "__main__":
    if sys.argv[1] == "send":
        with open(sys.argv[2]) as handle:
            print(json.dumps(send(json.load(handle), float(sys.argv[3]))), flush=True)
    elif sys.argv[1] == "listen":
        listen([int(p) for p in sys.argv[2].split(",")])
    else:
        with open(sys.argv[2]) as handle:
            print(json.dumps(probe(json.load(handle), float(sys.argv[3]))))
