"""What kafkalite's connections use of their Twisted transport, as a type.

Twisted types ``Protocol.transport`` as ``ITransport | None``: None until ``makeConnection``, and
ITransport alone has neither ``abortConnection`` (ITCPTransport) nor the producer/consumer
methods the back-pressure uses. Every transport a connected protocol gets here (the reactor's TCP
transports, iosim's FakeTransport in the in-process tier) is a TCP transport that is also an
IConsumer (we register as its push producer) and an IPushProducer (we pause its reading).
"""
from __future__ import annotations

from typing import Iterable, Protocol, cast

from twisted.internet.interfaces import IAddress, IProducer
from twisted.internet.protocol import Protocol as TwistedProtocol


class StreamTransport(Protocol):
    """The transport methods a broker connection calls (ITCPTransport + IConsumer + IPushProducer)."""

    def getPeer(self) -> IAddress: ...

    def writeSequence(self, data: Iterable[bytes]) -> None: ...

    def loseConnection(self) -> None: ...

    def abortConnection(self) -> None: ...

    def registerProducer(self, producer: IProducer, streaming: bool) -> None: ...

    def unregisterProducer(self) -> None: ...

    def pauseProducing(self) -> None: ...

    def resumeProducing(self) -> None: ...


def stream_transport(proto: TwistedProtocol) -> StreamTransport:
    """``proto.transport`` of a connected protocol (set by makeConnection, never cleared by Twisted)."""
    transport = proto.transport
    assert transport is not None, f"{type(proto).__name__} is not connected yet"
    return cast(StreamTransport, transport)
