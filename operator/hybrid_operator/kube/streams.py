"""Newline-delimited JSON streams (a watch's answer), split into lines here rather than by aiohttp.

Why this module exists: aiohttp's line reader fails on lines over 512 KiB, and a watch event carries
a whole object (a big ConfigMap is valid in Kubernetes), so :mod:`hybrid_operator.kube.client` reads
raw chunks and :func:`json_lines` joins them into lines up to a limit of its caller's choosing.
"""

from __future__ import annotations

from collections.abc import AsyncIterator

from hybrid_operator import errors


async def json_lines(chunks: AsyncIterator[bytes], limit: int, what: str) -> AsyncIterator[bytes]:
    """The non-blank newline-delimited lines of a byte stream, each at most ``limit`` bytes.

    A line that grows past ``limit`` raises :class:`errors.TemporaryError` (the caller starts over);
    the pieces of a line are joined once, so a long line costs its length, not its length squared.
    """
    pending: list[bytes] = []
    size = 0
    async for chunk in chunks:
        pieces = chunk.split(b"\n")
        for piece in pieces[:-1]:
            line = b"".join([*pending, piece]) if pending else piece
            pending, size = [], 0
            if len(line) > limit:
                raise errors.TemporaryError(f"{what}: an event longer than {limit} bytes (the API server's "
                                            "objects are smaller); the watch is started again")
            if line.strip():
                yield line
        last = pieces[-1]
        if last:
            pending.append(last)
            size += len(last)
            if size > limit:
                raise errors.TemporaryError(f"{what}: an event longer than {limit} bytes (the API server's "
                                            "objects are smaller); the watch is started again")
    if pending and b"".join(pending).strip():
        yield b"".join(pending)
