"""The wire session's encoding against kazoo's own serializer, and the answers no real ZooKeeper sends
(a huge frame, an answer to nothing, a truncated getData), from a scripted server on loopback: each must
end the batch with WireUnavailable, never a hang or a wrong answer."""

from __future__ import annotations

import asyncio
import struct
from collections.abc import AsyncIterator, Callable

import pytest
from kazoo.protocol.serialization import Connect, GetData
from kazoo.protocol.states import ZnodeStat

from auditor.metadata.zk.wire import (
    OP_GET_DATA,
    OP_SYNC,
    WireReader,
    WireUnavailable,
    decode_get_data,
    encode_connect,
    encode_request,
)

CONNECTED = struct.pack(">iiq", 0, 10_000, 0x1234) + struct.pack(">i", 16) + bytes(16) + b"\0"
STAT = (1, 2, 3, 4, 5, 6, 7, 0, 3, 0, 8)


def frame(body: bytes) -> bytes:
    return struct.pack(">i", len(body)) + body


def reply(xid: int, err: int = 0, body: bytes = b"") -> bytes:
    return frame(struct.pack(">iqi", xid, 99, err) + body)


def get_data_body(data: bytes) -> bytes:
    return struct.pack(">i", len(data)) + data + struct.pack(">qqqqiiiqiiq", *STAT)


def test_requests_are_encoded_as_kazoo_encodes_them() -> None:
    assert encode_connect(4000) == frame(Connect(0, 0, 4000, 0, b"\0" * 16, False).serialize())
    body = struct.pack(">ii", 7, OP_GET_DATA) + GetData("/ledgers/00/0000/L0001", None).serialize()
    assert encode_request(7, OP_GET_DATA, "/ledgers/00/0000/L0001") == frame(body)


def test_a_get_data_answer_decodes_to_kazoos_stat() -> None:
    data, stat = decode_get_data(memoryview(get_data_body(b"abc")))
    assert data == b"abc" and stat == ZnodeStat(*STAT)
    assert decode_get_data(memoryview(struct.pack(">i", -1) + struct.pack(">qqqqiiiqiiq", *STAT)))[0] == b""


Script = Callable[[int, int], bytes]  # (xid, op) of each request after the session -> what to send back


@pytest.fixture
async def scripted() -> AsyncIterator[Callable[[Script], asyncio.Future[int]]]:
    servers: list[asyncio.Server] = []

    def start(script: Script, connected: bytes = CONNECTED) -> asyncio.Future[int]:
        port: asyncio.Future[int] = asyncio.get_running_loop().create_future()

        async def serve(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
            try:
                size = struct.unpack(">i", await reader.readexactly(4))[0]
                await reader.readexactly(size)
                writer.write(frame(connected))
                while True:
                    size = struct.unpack(">i", await reader.readexactly(4))[0]
                    xid, op = struct.unpack(">ii", (await reader.readexactly(size))[:8])
                    writer.write(script(xid, op))
                    await writer.drain()
            except (asyncio.IncompleteReadError, ConnectionError):
                pass
            finally:
                writer.close()

        async def listen() -> None:
            server = await asyncio.start_server(serve, "127.0.0.1", 0)
            servers.append(server)
            port.set_result(server.sockets[0].getsockname()[1])

        asyncio.ensure_future(listen())
        return port

    yield start
    for s in servers:
        s.close()


async def read(port: int, n: int = 3) -> list[object]:
    reader = WireReader([("127.0.0.1", port)], chroot="", session_timeout_s=10, connect_timeout_s=2)
    try:
        return await reader.get_many([f"/z{i}" for i in range(n)], 8, None, 2)
    finally:
        reader.close()


async def test_a_well_behaved_server_is_read(scripted) -> None:
    port = await scripted(lambda xid, op: reply(xid, body=get_data_body(b"d%d" % xid) if op == OP_GET_DATA else b""))
    got = await read(port)
    assert [g[0] for g in got] == [b"d2", b"d3", b"d4"]  # xid 1 was the sync


@pytest.mark.parametrize(
    ("name", "script"),
    [
        ("a frame of 2 GiB", lambda xid, op: struct.pack(">i", 0x7FFFFFFF) if op == OP_GET_DATA else reply(xid)),
        ("two answers to one request", lambda xid, op: reply(xid) + reply(xid)),
        ("a truncated getData", lambda xid, op: reply(xid, body=b"\0\0\0\5ab") if op == OP_GET_DATA else reply(xid)),
        ("a negative frame size", lambda xid, op: struct.pack(">i", -5) if op == OP_GET_DATA else reply(xid)),
        ("silence", lambda xid, op: reply(xid) if op != OP_GET_DATA else b""),
    ],
)
async def test_a_hostile_answer_ends_the_batch_unavailable(scripted, name: str, script: Script) -> None:
    port = await scripted(script)
    with pytest.raises(WireUnavailable):
        await read(port)


async def test_a_server_that_refuses_the_session_is_unavailable(scripted) -> None:
    refused = struct.pack(">iiq", 0, 0, 0) + struct.pack(">i", 16) + bytes(16)  # timeOut 0: no session
    port = await scripted(lambda xid, op: reply(xid), connected=refused)
    with pytest.raises(WireUnavailable, match="no ZooKeeper server took a session"):
        await read(port)


async def held_sync_server(sync_err: int) -> tuple[int, list[int], asyncio.Server]:
    """A server that holds its answer to the sync until the batch's reads have arrived (a client that
    waited for it would hang here), then answers the sync with `sync_err` and every read. Returns its
    port, the ops it received in order, and the server."""
    ops: list[int] = []

    async def serve(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        try:
            size = struct.unpack(">i", await reader.readexactly(4))[0]
            await reader.readexactly(size)
            writer.write(frame(CONNECTED))
            held: list[tuple[int, int]] = []
            while True:
                size = struct.unpack(">i", await reader.readexactly(4))[0]
                xid, op = struct.unpack(">ii", (await reader.readexactly(size))[:8])
                ops.append(op)
                held.append((xid, op))
                if sum(o == OP_GET_DATA for _, o in held) == 3:
                    for x, o in held:
                        body = get_data_body(b"d%d" % x) if o == OP_GET_DATA else b""
                        writer.write(reply(x, err=sync_err if o == OP_SYNC else 0, body=body))
                    held.clear()
                    await writer.drain()
        except (asyncio.IncompleteReadError, ConnectionError):
            pass
        finally:
            writer.close()

    server = await asyncio.start_server(serve, "127.0.0.1", 0)
    return server.sockets[0].getsockname()[1], ops, server


async def test_a_batchs_reads_follow_its_sync_without_waiting_for_its_answer() -> None:
    port, ops, server = await held_sync_server(0)
    try:
        got = await asyncio.wait_for(read(port), 5)
    finally:
        server.close()
    assert ops == [OP_SYNC, OP_GET_DATA, OP_GET_DATA, OP_GET_DATA]  # the sync first, in the session's order
    assert [g[0] for g in got] == [b"d2", b"d3", b"d4"]


async def test_a_failed_sync_makes_the_batch_unavailable_whatever_the_reads_answered() -> None:
    port, _, server = await held_sync_server(-4)  # ZooKeeper's ConnectionLoss
    try:
        with pytest.raises(WireUnavailable, match="sync failed with ZooKeeper error -4"):
            await asyncio.wait_for(read(port), 5)
    finally:
        server.close()
