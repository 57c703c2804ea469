"""Which local process owns one end of a loopback TCP connection, from /proc alone.

The chaos campaign's observers (the bookie proxy's request accounting, the ZooKeeper session sampler in
`zklog`) name the sender of a request by process id. The kernel knows it: /proc/net/tcp{,6} lists every
socket with its local and remote address and its inode, and /proc/<pid>/fd/* links to `socket:[inode]`
for each socket a process holds. Nothing here asks the process itself, so a buggy sender cannot lie.
"""

from __future__ import annotations

import os
import socket

Addr = tuple[str, int]


def _addr(hexaddr: str) -> Addr:
    ip, port = hexaddr.split(":")
    raw = bytes.fromhex(ip)
    if len(raw) == 4:
        host = socket.inet_ntop(socket.AF_INET, raw[::-1])
    else:  # /proc/net/tcp6 prints four host-order 32-bit words
        words = b"".join(raw[i : i + 4][::-1] for i in range(0, 16, 4))
        host = socket.inet_ntop(socket.AF_INET6, words)
        if host.startswith("::ffff:"):
            host = host[7:]
    return host, int(port, 16)


def socket_table() -> list[tuple[Addr, Addr, int]]:
    """(local, remote, inode) of every TCP socket in this network namespace (v4-mapped v6 as v4)."""
    out: list[tuple[Addr, Addr, int]] = []
    for name in ("/proc/net/tcp", "/proc/net/tcp6"):
        try:
            with open(name) as f:
                lines = f.read().splitlines()[1:]
        except OSError:
            continue
        for line in lines:
            cols = line.split()
            if len(cols) < 10:
                continue
            try:
                out.append((_addr(cols[1]), _addr(cols[2]), int(cols[9])))
            except ValueError:
                continue
    return out


_RECENT: list[int] = []  # pids that owned sockets found lately, most recent first
_RECENT_KEEP = 32


def inode_owners(inodes: set[int]) -> dict[int, int]:
    """inode -> pid for those of `inodes` some process of ours can see holding (first holder found)."""
    want = {f"socket:[{i}]": i for i in inodes if i}
    found: dict[int, int] = {}
    if not want:
        return found
    # The processes that owned the last sockets asked about first (the same few senders connect again and
    # again), then the rest newest first: a scan of every fd of every process takes seconds on a loaded
    # machine, long enough for a sender to time out and close before it is named.
    every = sorted((int(p) for p in os.listdir("/proc") if p.isdigit()), reverse=True)
    alive = set(every)
    recent = [p for p in _RECENT if p in alive]
    for pid in dict.fromkeys([*recent, *every]):
        fd_dir = f"/proc/{pid}/fd"
        try:
            fds = os.listdir(fd_dir)
        except OSError:
            continue
        for fd in fds:
            try:
                target = os.readlink(f"{fd_dir}/{fd}")
            except OSError:
                continue
            inode = want.get(target)
            if inode is not None and inode not in found:
                found[inode] = int(pid)
                if pid in _RECENT:
                    _RECENT.remove(pid)
                _RECENT.insert(0, pid)
                del _RECENT[_RECENT_KEEP:]
        if len(found) == len(want):
            break
    return found


def _same(a: Addr, b: Addr) -> bool:
    return a[1] == b[1] and (a[0] == b[0] or {a[0], b[0]} <= {"127.0.0.1", "::1", "localhost"})


def pids_of_peers(pairs: list[tuple[Addr, Addr]]) -> dict[tuple[Addr, Addr], int | None]:
    """For each (peer, server) pair of an accepted connection (`peer` the client's address as the
    server sees it, `server` the address it connected to), the pid holding the client's socket: the
    socket whose local address is `peer` and remote address `server`. None when it is gone or hidden."""
    table = socket_table()
    inode_of: dict[tuple[Addr, Addr], int] = {}
    for pair in pairs:
        peer, server = pair
        for local, remote, inode in table:
            if inode and _same(local, peer) and _same(remote, server):
                inode_of[pair] = inode
                break
    owners = inode_owners(set(inode_of.values()))
    return {pair: owners.get(inode_of.get(pair, 0)) for pair in pairs}


def pid_of_peer(peer: Addr, server: Addr) -> int | None:
    """`pids_of_peers` for one connection."""
    return pids_of_peers([(peer, server)])[(peer, server)]
