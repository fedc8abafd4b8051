"""The shared shell of placet's stream wrappers around the SDK's stdio streams.

`flow.GatedReadStream`, `flow.GatedWriteStream` and `wire.ScreenedReadStream` each wrap
the stream object below them (`inner`) and change only `receive` or `send`; iteration,
closing and the async context manager are the same for all three and live here.
"""

from __future__ import annotations

from types import TracebackType
from typing import Any, Self

import anyio


class WrappedStream:
    """Closing and ``async with`` delegate to `inner`; subclasses add `receive`/`send`."""

    inner: Any

    async def aclose(self) -> None:
        await self.inner.aclose()

    async def __aenter__(self) -> Self:
        return self

    async def __aexit__(
        self,
        exc_type: type[BaseException] | None,
        exc_val: BaseException | None,
        exc_tb: TracebackType | None,
    ) -> bool | None:
        await self.aclose()
        return None


class WrappedReadStream(WrappedStream):
    """A wrapped read stream: ``async for`` over `receive` until the stream ends, and the
    sender context the SDK's `ReadStream` exposes (`last_context`) passed through."""

    @property
    def last_context(self) -> Any:
        return getattr(self.inner, "last_context", None)

    async def receive(self) -> Any:  # pragma: no cover - every subclass defines it
        raise NotImplementedError

    def __aiter__(self) -> Self:
        return self

    async def __anext__(self) -> Any:
        try:
            return await self.receive()
        except anyio.EndOfStream:
            raise StopAsyncIteration from None
