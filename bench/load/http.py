"""A minimal HTTP/1.1 client over one keep-alive loopback connection (load benchmark).

The load benchmark measures the coordinator, so its 64 simulated participants must cost
as little CPU as possible: ``httpx`` spends more CPU per request than the coordinator's
own work on a small poll (its connection pool is scanned on every request). This client
sends one request at a time on one persistent connection and reads a ``Content-Length``
or chunked body; nothing else (no TLS, no redirects, no compression, no proxies).

A connection the server has closed (keep-alive timeout, ``Connection: close``) is
reopened before the next request; a request that fails on the wire raises
:class:`ConnectionError` and leaves the connection closed (the caller retries).
"""

from __future__ import annotations

import asyncio
import contextlib
import json
from dataclasses import dataclass
from typing import Any

__all__ = ["Connection", "Reply"]


@dataclass(frozen=True)
class Reply:
    """An answered request: status code, headers (lower-case names), body bytes."""

    status_code: int
    headers: dict[str, str]
    content: bytes

    def json(self) -> Any:
        return json.loads(self.content)


class Connection:
    """One keep-alive HTTP/1.1 connection to ``host:port`` (see the module docstring)."""

    def __init__(self, host: str, port: int) -> None:
        self.host, self.port = host, port
        self._reader: asyncio.StreamReader | None = None
        self._writer: asyncio.StreamWriter | None = None

    async def close(self) -> None:
        writer, self._reader, self._writer = self._writer, None, None
        if writer is not None:
            writer.close()
            with contextlib.suppress(ConnectionError, OSError):
                await writer.wait_closed()

    async def request(
        self,
        method: str,
        path: str,
        *,
        headers: dict[str, str] | None = None,
        content: bytes = b"",
    ) -> Reply:
        """Send one request and read its whole answer."""
        if self._reader is None or self._reader.at_eof():
            await self.close()
            self._reader, self._writer = await asyncio.open_connection(self.host, self.port)
        reader, writer = self._reader, self._writer
        assert reader is not None
        assert writer is not None
        lines = [f"{method} {path} HTTP/1.1", f"Host: {self.host}:{self.port}"]
        lines += [f"{k}: {v}" for k, v in (headers or {}).items()]
        if content or method in ("POST", "PUT", "PATCH"):
            lines.append(f"Content-Length: {len(content)}")
        head = ("\r\n".join(lines) + "\r\n\r\n").encode("latin-1")
        try:
            writer.write(head + content if len(content) < 65536 else head)
            if len(content) >= 65536:
                writer.write(content)
            await writer.drain()
            status, fields = await self._read_head(reader)
            body = await self._read_body(reader, fields)
        except (asyncio.IncompleteReadError, ConnectionError, OSError, ValueError) as err:
            await self.close()
            raise ConnectionError(f"{method} {path}: {type(err).__name__}: {err}") from err
        if fields.get("connection", "").lower() == "close":
            await self.close()
        return Reply(status, fields, body)

    @staticmethod
    async def _read_head(reader: asyncio.StreamReader) -> tuple[int, dict[str, str]]:
        raw = await reader.readuntil(b"\r\n\r\n")
        status_line, *header_lines = raw[:-4].decode("latin-1").split("\r\n")
        version, code, *_ = status_line.split(" ", 2)
        if not version.startswith("HTTP/1."):
            raise ValueError(f"not an HTTP/1.x status line: {status_line!r}")
        fields: dict[str, str] = {}
        for line in header_lines:
            name, _, value = line.partition(":")
            fields[name.strip().lower()] = value.strip()
        return int(code), fields

    @staticmethod
    async def _read_body(reader: asyncio.StreamReader, fields: dict[str, str]) -> bytes:
        if "content-length" in fields:
            return await reader.readexactly(int(fields["content-length"]))
        if fields.get("transfer-encoding", "").lower() == "chunked":
            chunks: list[bytes] = []
            while True:
                size = int((await reader.readuntil(b"\r\n"))[:-2].split(b";")[0], 16)
                if size == 0:
                    await reader.readuntil(b"\r\n")  # no trailers are sent
                    return b"".join(chunks)
                chunks.append(await reader.readexactly(size))
                await reader.readexactly(2)
        raise ValueError("an answer with neither Content-Length nor chunked encoding")
