"""Transaction markers: the coordinator's COMMIT/ABORT control batches, to every partition of a
transaction (Kafka's ``TransactionMarkerChannelManager`` and the leader side of WriteTxnMarkers).

:func:`write_markers_as_leader` appends one marker per partition this broker leads, with the
replica manager's acks=all wait, and answers a code per partition (the WriteTxnMarkers handler
uses it too). :class:`TxnMarkerChannel` is the coordinator's :class:`MarkerSender`: it groups the
partitions by their leader in the served metadata, writes the local ones directly and sends the
others WriteTxnMarkers (key 27) over an inter-broker connection, and retries what failed
(leader moved, not enough replicas, timeouts, lost connections) every ``retry_backoff_ms`` with a
fresh leader lookup until every partition has its marker. A partition that is no longer in the
metadata (its topic was deleted) needs no marker, as in Kafka; a fenced coordinator or producer
epoch stops the sending and fails the Deferred.
"""
from __future__ import annotations

import logging
from typing import Any, Callable

from twisted.internet import defer

from kafkalite.broker.offsets_topic import OFFSETS_TOPIC
from kafkalite.broker.replica_manager import ReplicaManager
from kafkalite.errors import ErrorCode, KafkaError
from kafkalite.metadata import MetadataCache
from kafkalite.net import client as net_client
from kafkalite.records.control import ControlType
from kafkalite.protocol.api_keys import ApiKey
from kafkalite.topic_partition import TopicPartition

log = logging.getLogger(__name__)

#: codes after which the marker is not retried: the sender was fenced
FATAL = frozenset({ErrorCode.TRANSACTION_COORDINATOR_FENCED, ErrorCode.INVALID_PRODUCER_EPOCH,
                   ErrorCode.PRODUCER_FENCED})


class MarkersFenced(Exception):
    """A partition refused the marker for good (coordinator or producer epoch fenced)."""


def write_markers_as_leader(replicas: ReplicaManager, producer_id: int, producer_epoch: int, commit: bool,
                            coordinator_epoch: int, partitions: list[TopicPartition], timeout_ms: int,
                            groups: Any = None) -> defer.Deferred:
    """Append the marker to each partition as its leader; fires with {partition: ErrorCode} once
    every append is replicated (acks=all) or failed. A replicated marker in a
    ``__consumer_offsets`` partition completes the producer's pending transactional offsets
    there (``groups``: the group coordinator; Kafka's scheduleHandleTxnCompletion)."""
    control = ControlType.COMMIT if commit else ControlType.ABORT
    codes: dict[TopicPartition, ErrorCode] = {}
    waiting: list[tuple[TopicPartition, Any]] = []
    for tp in partitions:
        try:
            part, result = replicas.append_txn_marker(tp[0], tp[1], control, producer_id, producer_epoch,
                                                      coordinator_epoch)
        except KafkaError as exc:
            codes[tp] = ErrorCode(exc.code)
            continue
        waiting.append((tp, replicas.pending_ack(part, result)))
    if not waiting:
        return defer.succeed(codes)

    def replicated(results: list[ErrorCode]) -> dict[TopicPartition, ErrorCode]:
        for (tp, _), code in zip(waiting, results):
            codes[tp] = ErrorCode(code)
            if code == ErrorCode.NONE and tp[0] == OFFSETS_TOPIC and groups is not None:
                groups.complete_txn(producer_id, tp[1], commit)
        return codes
    return replicas.await_replication([p for _, p in waiting], timeout_ms).addCallback(replicated)


class TxnMarkerChannel:
    def __init__(self, broker_id: Callable[[], int], clock: Any, metadata: MetadataCache, replicas: ReplicaManager,
                 endpoint_of: Callable[[int], tuple[str, int] | None], *, request_timeout_ms: int = 30000,
                 retry_backoff_ms: int = 100, connect: Callable[..., defer.Deferred] = net_client.connect,
                 groups: Any = None) -> None:
        self.broker_id = broker_id
        self.clock = clock
        self.metadata = metadata
        self.replicas = replicas
        self.endpoint_of = endpoint_of
        self.request_timeout_ms = request_timeout_ms
        self.retry_backoff_ms = retry_backoff_ms
        self.connect = connect
        self.groups = groups                            # group coordinator: transactional offsets
        self.conns: dict[int, defer.Deferred] = {}      # broker id -> Deferred[KafkaClientProtocol]
        self.stopped = False

    def send_markers(self, transactional_id: str, producer_id: int, producer_epoch: int, commit: bool,
                     coordinator_epoch: int, partitions: frozenset[TopicPartition]) -> defer.Deferred:
        done: defer.Deferred = defer.Deferred()
        pending = set(partitions)

        def attempt() -> None:
            if self.stopped:
                done.errback(MarkersFenced("the broker is shutting down"))
                return
            by_leader: dict[int, list[TopicPartition]] = {}
            for tp in list(pending):
                if not self.metadata.partition_exists(*tp):
                    pending.discard(tp)              # deleted: nothing to mark
                    continue
                by_leader.setdefault(self.metadata.leader_of(*tp), []).append(tp)
            if not pending:
                done.callback(None)
                return
            rounds = []
            for leader, tps in by_leader.items():
                if leader < 0:
                    continue                          # no leader now: retried
                if leader == self.broker_id():
                    d = write_markers_as_leader(self.replicas, producer_id, producer_epoch, commit,
                                                coordinator_epoch, tps, self.request_timeout_ms, self.groups)
                else:
                    d = self._remote(leader, producer_id, producer_epoch, commit, coordinator_epoch, tps)
                rounds.append(d)
            defer.gatherResults(rounds, consumeErrors=True).addBoth(settle)

        def settle(results: Any) -> None:
            if not isinstance(results, list):
                results = []
            for codes in results:
                for tp, code in codes.items():
                    if code == ErrorCode.NONE:
                        pending.discard(tp)
                    elif code in FATAL:
                        log.warning("marker of %s for %s-%d refused: %s", transactional_id, tp[0], tp[1], code.name)
                        done.errback(MarkersFenced(f"{tp[0]}-{tp[1]}: {code.name}"))
                        return
            if not pending:
                done.callback(None)
                return
            self.clock.callLater(self.retry_backoff_ms / 1000.0, attempt)

        attempt()
        return done

    def _remote(self, leader: int, producer_id: int, producer_epoch: int, commit: bool, coordinator_epoch: int,
                tps: list[TopicPartition]) -> defer.Deferred:
        """WriteTxnMarkers v0 to ``leader``; fires with {partition: code}; a transport failure
        answers every partition NETWORK_EXCEPTION (retried) and drops the connection."""
        by_topic: dict[str, list[int]] = {}
        for topic, p in tps:
            by_topic.setdefault(topic, []).append(p)
        body = {"markers": [{"producer_id": producer_id, "producer_epoch": producer_epoch,
                             "transaction_result": commit, "coordinator_epoch": coordinator_epoch,
                             "topics": [{"name": t, "partition_indexes": ps} for t, ps in by_topic.items()]}]}
        timeout = self.request_timeout_ms / 1000.0

        def send(conn: Any) -> defer.Deferred:
            return conn.request(ApiKey.WRITE_TXN_MARKERS, 0, body, timeout)

        def answered(resp: dict[str, Any]) -> dict[TopicPartition, ErrorCode]:
            codes: dict[TopicPartition, ErrorCode] = {}
            for marker in resp["markers"]:
                for t in marker["topics"]:
                    for p in t["partitions"]:
                        codes[(t["name"], p["partition_index"])] = ErrorCode(p["error_code"])
            return codes

        def failed(f: Any) -> dict[TopicPartition, ErrorCode]:
            log.info("WriteTxnMarkers to broker %d failed: %s", leader, f.getErrorMessage())
            conn_d = self.conns.pop(leader, None)
            if conn_d is not None:
                conn_d.addCallback(lambda c: c.close()).addErrback(lambda _: None)
            return {tp: ErrorCode.NETWORK_EXCEPTION for tp in tps}

        return self._connection(leader).addCallback(send).addCallbacks(answered, failed)

    def _connection(self, broker: int) -> defer.Deferred:
        conn_d = self.conns.get(broker)
        if conn_d is None:
            endpoint = self.endpoint_of(broker)
            if endpoint is None:
                return defer.fail(KafkaError(f"broker {broker} has no inter-broker endpoint"))
            conn_d = self.connect(self.clock, endpoint[0], endpoint[1], f"txn-markers-{self.broker_id()}",
                                  self.request_timeout_ms / 1000.0)
            self.conns[broker] = conn_d

            def lost(f: Any) -> Any:
                if self.conns.get(broker) is conn_d:
                    del self.conns[broker]
                return f
            conn_d.addErrback(lost)
        d: defer.Deferred = defer.Deferred()

        def ready(conn: Any) -> Any:
            d.callback(conn)
            return conn

        def failed(f: Any) -> None:
            d.errback(f)
        conn_d.addCallbacks(ready, failed)
        return d

    def stop(self) -> None:
        self.stopped = True
        for conn_d in self.conns.values():
            conn_d.addCallback(lambda c: c.close()).addErrback(lambda _: None)
        self.conns.clear()
