"""The distributed herder (Kafka's ``DistributedHerder`` and ``WorkerCoordinator``): workers
sharing a ``group.id`` divide connectors and tasks between them through the group coordinator
(protocol type ``connect``), and keep every configuration in the config topic.

One herder thread does everything that changes what runs here, in order: rebalances (join, then
stop what was revoked and start what was assigned), config topic updates (a connector's new
config restarts it; new task configs or connectors make every worker rejoin so the leader
reassigns), target states, restart requests, and the task configurations of the connectors it
runs. As in Kafka, only the leader writes task configurations: a follower running a connector
sends the configurations it generated to the leader's internal endpoint
(``POST <leader URL>/connectors/<name>/tasks``) from a forwarding thread (blocking the herder
thread on the leader could push this worker out of the group), retrying every 250 ms until the
leader has them or the connector stops running here.

``connect.protocol``: ``eager`` (every rebalance stops everything, the leader deals it all out
again round-robin) or ``compatible`` / ``sessioned`` (KIP-415 incremental cooperative: only
moved work stops; a departed worker's work waits ``scheduled.rebalance.max.delay.ms`` for it to
come back). Under ``sessioned`` (protocol v2) internal requests are signed (KIP-507, ``signing.py``):
the leader writes a session key to the config topic (again when it expires after
``inter.worker.key.ttl.ms`` or was made with other settings), followers sign the task configs
they send with it, and the leader refuses an unsigned or wrongly signed one. REST writes that
need the leader (create, update, delete, restart) raise :class:`NotLeaderException` with the
leader's URL on a follower; the REST layer forwards them.
"""
from __future__ import annotations

import json
import logging
import queue
import threading
import time
from concurrent.futures import ThreadPoolExecutor
from typing import Any, Callable, Mapping

from kafkalite.client import ClientError, KafkaClient
from kafkalite.client.group import GroupMember
from kafkalite.connect.errors import AlreadyExistsException, ConnectException, NotFoundException

from . import protocol as proto
from . import status as st
from .connector_config import ConnectorConfig
from .herder import Herder, NotLeaderException, RebalanceNeededException
from .kafka_stores import ConfigUpdate, KafkaConfigStore, KafkaOffsetStore, KafkaStatusStore
from .metrics import ConnectMetrics
from .rest_client import ConnectRestException, http_request_raw, task_configs_url
from .signing import InternalRequestSignature, SessionKey, sign, verify
from .worker import PAUSED, STARTED, ConnectorTaskId, Worker
from .worker_config import WorkerConfig

log = logging.getLogger(__name__)

Unit = proto.Unit

#: Kafka's RECONFIGURE_CONNECTOR_TASKS_BACKOFF_MS: how soon a failed forward of task configs is retried
RECONFIGURE_BACKOFF_S = 0.25


class ConnectMember(GroupMember):
    """A group member speaking Connect's protocol; the leader's assignment is the herder's."""

    protocol_type = "connect"

    def __init__(self, client: KafkaClient, herder: "DistributedHerder", config: WorkerConfig) -> None:
        super().__init__(client, config.group_id, session_timeout_ms=config.session_timeout_ms,
                         rebalance_timeout_ms=config.rebalance_timeout_ms,
                         heartbeat_interval_ms=config.heartbeat_interval_ms, assignors=[])
        self.herder = herder

    def protocols(self) -> list[tuple[str, bytes]]:
        return self.herder.member_protocols()

    def assign(self, protocol: str, members: list[tuple[str, bytes]]) -> dict[str, bytes]:
        return self.herder.leader_assign(protocol, members)


class DistributedHerder(Herder):
    def __init__(self, config: WorkerConfig, worker: Worker, config_store: KafkaConfigStore,
                 offset_store: KafkaOffsetStore, status_store: KafkaStatusStore, cluster_id: str) -> None:
        super().__init__(worker, status_store, cluster_id)
        self.config = config
        self.config_store = config_store
        self.offset_store = offset_store
        self.kafka_status = status_store
        self.state = config_store.state          # replayed in place by the config store
        self.lock = config_store.lock
        self.url = config.advertised_url
        self.member = ConnectMember(KafkaClient(config.bootstrap_servers, client_id=f"connect-{worker.worker_id}",
                                                security=config.client_security("admin.")), self, config)
        self.generation = -1
        self.leader_id = ""
        self.leader_url: str | None = None
        self.protocol = proto.EAGER
        self.running_connectors: set[str] = set()
        self.running_tasks: set[ConnectorTaskId] = set()
        self.coop = proto.CooperativeState()
        self.owners: dict[Unit, str] = {}
        self.rebalancing = True
        self.ready = False
        self._events: "queue.Queue[Any]" = queue.Queue()
        self._rejoin_at: float | None = None
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None
        self._known: set[str] = set()
        #: the config each task running here was started with (a commit of the same configs is no change)
        self._started_with: dict[ConnectorTaskId, dict[str, str]] = {}
        #: Kafka's forwardRequestExecutor: sends task configs to the leader off the herder thread
        self._forwarder = ThreadPoolExecutor(max_workers=1, thread_name_prefix="connect-forward")
        #: the blocking HTTP call to another worker (url, method, body bytes, headers)
        self.http: Callable[..., Any] = http_request_raw
        #: KIP-507: the current session key (read from the config topic) and when the leader replaces it
        self.key_generator = config.signing.key_generator()
        self.session_key: SessionKey | None = None
        self.key_expiration = float("inf")
        worker.generation = lambda: self.generation
        worker.reconfiguration_listener = lambda name: self._events.put(("reconfigure", name))
        config_store.on_update = self._on_config_update

    @classmethod
    def create(cls, config: WorkerConfig, worker_id: str, cluster_id: str,
               metrics: ConnectMetrics | None = None) -> "DistributedHerder":
        config_store = KafkaConfigStore(config, lambda update: None)
        offset_store = KafkaOffsetStore(config)
        status_store = KafkaStatusStore(config)
        worker = Worker(worker_id, config, offset_store, status_store, metrics=metrics)
        return cls(config, worker, config_store, offset_store, status_store, cluster_id)

    # -- lifecycle --------------------------------------------------------------------------
    def start(self) -> None:
        """Read the three topics to their ends (creating them if needed), then join the group."""
        self.offset_store.start()
        self.kafka_status.start()
        self.config_store.start()
        self._known = set(self.state.connectors)
        log.info("config topic read to offset %d: %d connectors", self.state.offset, len(self.state.connectors))
        self._thread = threading.Thread(target=self._run, name="DistributedHerder", daemon=True)
        self._thread.start()

    def stop(self) -> None:
        self._stop.set()
        self._events.put(None)
        if self._thread is not None:
            self._thread.join(self.config.task_shutdown_graceful_timeout_ms / 1000.0 + 30)
        self._forwarder.shutdown(wait=False, cancel_futures=True)
        self._stop_all()
        try:
            self.member.leave()
        except ClientError as exc:
            log.debug("leaving the group: %s", exc)
        for store in (self.config_store, self.kafka_status, self.offset_store):
            store.stop()
        self.member.client.close()
        log.info("distributed herder stopped")

    def _on_config_update(self, update: ConfigUpdate) -> None:
        """From the config topic's reader: a new session key is used at once (requests signed
        with it may already be on their way); everything else goes to the herder thread."""
        if update.session_key is not None:
            self._adopt_key(update.session_key)
        self._events.put(update)

    def _adopt_key(self, key: SessionKey) -> None:
        log.info("Session key updated")
        self.session_key = key
        self.key_expiration = key.expiration(self.config.signing.key_ttl_ms)

    def request_signing_enabled(self) -> bool:
        """Kafka's internalRequestValidationEnabled: the group speaks protocol v2 (sessioned)."""
        return proto.VERSION_OF.get(self.protocol, 0) >= 2

    def _check_key_rotation(self) -> None:
        """Kafka's checkForKeyRotation: the leader distributes a key when there is none, it has
        expired, or it was made with another algorithm or size; a follower picks up the key
        its start-up read of the config topic found."""
        if not self.request_signing_enabled() or not self.ready:
            return
        key = self.session_key
        if not self.is_leader():
            stored = getattr(self.config_store, "session_key", None)
            if key is None and stored is not None:
                self._adopt_key(stored)
            return
        now = int(time.time() * 1000)
        if key is None or self.key_expiration <= now or not self.key_generator.matches(key):
            log.info("distributing a new session key (%s)", "none yet" if key is None else "expired or outdated")
            self.key_expiration = float("inf")            # until our own key comes back from the topic
            try:
                self.config_store.put_session_key(self.key_generator.generate(now))
            except Exception as exc:  # noqa: BLE001 - retried on the next tick after a re-read
                log.warning("Failed to write new session key to config topic: %s", exc)
                self.key_expiration = 0
                self._stop.wait(1.0)

    def _run(self) -> None:
        while not self._stop.is_set():
            try:
                if self.member.needs_rejoin or (self._rejoin_at is not None and time.monotonic() >= self._rejoin_at):
                    self._rebalance()
                    continue
                self._check_key_rotation()
                timeout = 0.1 if self._rejoin_at is None else max(0.0, min(0.1, self._rejoin_at - time.monotonic()))
                try:
                    event = self._events.get(timeout=timeout)
                except queue.Empty:
                    continue
                if event is None:
                    break
                self._handle(event)
            except Exception:  # noqa: BLE001 - the herder thread must survive a bad moment
                log.exception("herder tick failed")
                self._stop.wait(1.0)

    # -- the group protocol -----------------------------------------------------------------
    def _allocation(self) -> proto.Assignment:
        return proto.Assignment(proto.NO_ERROR, self.leader_id, self.leader_url or "", self.state.offset,
                                proto.work_of(self.running_connectors,
                                              [(t.connector, t.task) for t in self.running_tasks]), version=1)

    def member_protocols(self) -> list[tuple[str, bytes]]:
        out = []
        for name, version in proto.OFFERED[self.config.connect_protocol]:
            meta = proto.WorkerMetadata(self.url, self.state.offset, version,
                                        self._allocation() if version >= 1 else None)
            out.append((name, proto.encode_metadata(meta)))
        return out

    def leader_assign(self, protocol: str, members: list[tuple[str, bytes]]) -> dict[str, bytes]:
        metas = {}
        for member_id, raw in members:
            try:
                metas[member_id] = proto.decode_metadata(bytes(raw))
            except proto.ProtocolError as exc:
                log.error("member %s sent unreadable Connect metadata: %s", member_id, exc)
        leader_url = metas[self.member.member_id].url if self.member.member_id in metas else self.url
        max_offset = max((m.config_offset for m in metas.values()), default=-1)
        try:
            self.config_store.refresh()
        except Exception as exc:  # noqa: BLE001 - an unreadable config topic is a config mismatch
            log.warning("leader could not read the config topic to its end: %s", exc)
        snapshot = self.config_store.snapshot()
        version = proto.VERSION_OF.get(protocol, 0)
        if snapshot.offset < max_offset:
            mismatch = proto.Assignment(proto.CONFIG_MISMATCH, self.member.member_id, leader_url, snapshot.offset,
                                        version=version)
            return {m: proto.encode_assignment(mismatch) for m in metas}
        units: set[Unit] = {(c, proto.CONNECTOR_TASK) for c in snapshot.connectors}
        units |= {(t.connector, t.task) for t in snapshot.all_task_ids()}
        out: dict[str, bytes] = {}
        owners: dict[Unit, str] = {}
        if protocol == proto.EAGER:
            plan = proto.eager_assign(list(metas), sorted(snapshot.connectors),
                                      [(t.connector, t.task) for t in snapshot.all_task_ids()])
            for m, work in plan.items():
                for c, ts in work.items():
                    for t in ts:
                        owners[(c, t)] = metas[m].url
                out[m] = proto.encode_assignment(proto.Assignment(proto.NO_ERROR, self.member.member_id, leader_url,
                                                                  snapshot.offset, work, version=0))
        else:
            running = {m: {(c, t) for c, ts in (meta.allocation.assigned if meta.allocation else {}).items()
                           for t in ts} for m, meta in metas.items()}
            cplan = proto.cooperative_assign(running, units, self.coop, self.config.scheduled_rebalance_max_delay_ms,
                                             int(time.time() * 1000))
            for m in metas:
                new = cplan.assigned[m] - running[m]
                for u in cplan.assigned[m]:
                    owners[u] = metas[m].url
                a = proto.Assignment(proto.NO_ERROR, self.member.member_id, leader_url, snapshot.offset,
                                     proto.work_of([c for c, t in new if t == proto.CONNECTOR_TASK],
                                                   [(c, t) for c, t in new if t != proto.CONNECTOR_TASK]),
                                     proto.work_of([c for c, t in cplan.revoked[m] if t == proto.CONNECTOR_TASK],
                                                   [(c, t) for c, t in cplan.revoked[m] if t != proto.CONNECTOR_TASK]),
                                     cplan.delay_ms, version)
                out[m] = proto.encode_assignment(a)
        self.owners = owners
        log.info("leader assigned %d connectors and tasks over %d workers (protocol %s)", len(units), len(metas),
                 protocol)
        return out

    def _rebalance(self) -> None:
        self.rebalancing = True
        self._rejoin_at = None
        eager = self.config.connect_protocol == "eager" or self.protocol == proto.EAGER
        if eager and (self.running_connectors or self.running_tasks):
            log.info("eager rebalance: stopping every connector and task before rejoining")
            self._stop_all()
        try:
            raw = self.member.join_group(time.monotonic() + self.config.rebalance_timeout_ms / 1000.0 + 30)
        except ClientError as exc:
            log.warning("joining the Connect group failed: %s", exc)
            self.member.needs_rejoin = True
            self._stop.wait(1.0)
            return
        self.protocol = self.member.protocol or proto.EAGER
        try:
            assignment = proto.decode_assignment(raw)
        except proto.ProtocolError as exc:
            log.error("unreadable assignment: %s", exc)
            self.member.needs_rejoin = True
            return
        self.generation = self.member.generation
        self.leader_id, self.leader_url = assignment.leader, assignment.leader_url or None
        if assignment.error == proto.CONFIG_MISMATCH:
            log.info("the leader's config is ahead of ours (offset %d): reading the config topic, then rejoining",
                     assignment.config_offset)
            self.config_store.refresh()
            self.member.needs_rejoin = True
            return
        if assignment.config_offset > self.state.offset:
            self.config_store.refresh()
        log.info("joined group generation %d as %s (leader %s, protocol %s): assigned %s, revoked %s, delay %d ms",
                 self.generation, self.member.member_id, self.leader_url, self.protocol, assignment.assigned,
                 assignment.revoked, assignment.delay)
        if assignment.version == 0:
            # eager: the assignment is the whole of what runs here
            self._stop_units(set(self.running_connectors) - set(assignment.connectors()),
                             {t for t in self.running_tasks
                              if (t.connector, t.task) not in set(assignment.tasks())})
            self._start_units(assignment.connectors(), assignment.tasks())
        else:
            self._stop_units(set(assignment.revoked_connectors()),
                             {ConnectorTaskId(c, t) for c, t in assignment.revoked_tasks()})
            self._start_units(assignment.connectors(), assignment.tasks())
            if assignment.revoked:
                self.member.needs_rejoin = True          # the revoked work is handed out next round
            if assignment.delay > 0:
                self._rejoin_at = time.monotonic() + assignment.delay / 1000.0
        self.rebalancing = self.member.needs_rejoin
        self.ready = True

    # -- running work -----------------------------------------------------------------------
    def _start_units(self, connectors: list[str], tasks: list[tuple[str, int]]) -> None:
        snapshot = self.config_store.snapshot()
        for c in connectors:
            if c in self.running_connectors or c not in snapshot.connectors:
                continue
            self.running_connectors.add(c)
            if self.worker.start_connector(c, snapshot.connectors[c], snapshot.target(c)):
                self._reconfigure_tasks(c)
        for c, t in tasks:
            tid = ConnectorTaskId(c, t)
            if tid in self.running_tasks or c not in snapshot.tasks or t >= len(snapshot.tasks[c]):
                continue
            self.running_tasks.add(tid)
            self._started_with[tid] = dict(snapshot.tasks[c][t])
            self.worker.start_task(tid, snapshot.connectors[c], snapshot.tasks[c][t], snapshot.target(c))

    def _stop_units(self, connectors: set[str], tasks: set[ConnectorTaskId]) -> None:
        tasks = tasks & self.running_tasks
        if tasks:
            self.worker.stop_tasks(sorted(tasks))
            self.running_tasks -= tasks
            for t in tasks:
                self._started_with.pop(t, None)
        for c in sorted(connectors & self.running_connectors):
            self.worker.stop_connector(c)
            self.running_connectors.discard(c)

    def _stop_all(self) -> None:
        self._stop_units(set(self.running_connectors), set(self.running_tasks))

    def _reconfigure_tasks(self, connector: str) -> None:
        """Ask a connector running here for its task configs; write them if they changed."""
        if connector not in self.running_connectors or not self.worker.is_running(connector):
            return
        snapshot = self.config_store.snapshot()
        if connector not in snapshot.connectors:
            return
        try:
            cfg = ConnectorConfig.parse(snapshot.connectors[connector])
            new = self.worker.connector_task_configs(connector, cfg.tasks_max)
        except Exception as exc:  # noqa: BLE001 - the connector's failure is its status
            log.error("%s failed to generate task configs: %s", connector, exc)
            self.worker.connector_failed(connector, exc)
            return
        if new == snapshot.tasks.get(connector):
            return
        if self.is_leader():
            log.info("writing %d task configs for %s", len(new), connector)
            self.config_store.put_task_configs(connector, new)
        else:
            self._forwarder.submit(self._forward_task_configs, connector, new)

    def is_leader(self) -> bool:
        return bool(self.leader_id) and self.leader_id == self.member.member_id

    def _forward_task_configs(self, connector: str, configs: list[dict[str, str]]) -> None:
        """On the forwarding thread: POST the configs to the leader; on failure ask the herder
        thread to reconfigure again after a back-off (it regenerates them and compares with the
        config topic, so a write that did land is not repeated)."""
        leader = self.leader_url
        try:
            if not leader or not leader.strip():
                raise ConnectException("Request to leader to reconfigure connector tasks failed because the URL of "
                                       "the leader's REST interface is empty!")
            body = json.dumps(configs, separators=(",", ":")).encode()
            self.http(task_configs_url(leader, connector), "POST", body, self._internal_request_headers(body))
            log.info("sent %d task configs for %s to the leader %s", len(configs), connector, leader)
        except Exception as exc:  # noqa: BLE001 - whatever failed, the same retry
            if isinstance(exc, ConnectRestException) and exc.status == 403:
                log.info("Failed to reconfigure the tasks of %s (%s), possibly due to a rotated session key; "
                         "retrying after backoff", connector, exc)
            else:
                log.error("Request to leader to reconfigure connector tasks of %s failed, retrying after backoff: %s",
                          connector, exc)
            if not self._stop.is_set():
                timer = threading.Timer(RECONFIGURE_BACKOFF_S, self._events.put, args=(("reconfigure", connector),))
                timer.daemon = True
                timer.start()

    def _internal_request_headers(self, body: bytes) -> dict[str, str]:
        """The signature headers of an internal request, once a session key is known (Kafka's
        RestClient signs whenever it has a key)."""
        key = self.session_key
        if key is None:
            return {}
        return sign(key, body, self.config.signing.signature_algorithm)

    def put_task_configs(self, name: str, configs: list[dict[str, str]],
                         signature: InternalRequestSignature | None = None) -> None:
        """The internal endpoint (Kafka's ``putTaskConfigs``): under ``sessioned`` the request
        must be signed with the current session key; only the leader writes task configs."""
        if self.request_signing_enabled():
            verify(signature, self.session_key, self.config.signing.verification_algorithms)
        if not self.is_leader():
            raise NotLeaderException("Only the leader may write task configurations.", self.leader_url)
        with self.lock:
            if name not in self.state.connectors:
                raise NotFoundException(f"Connector {name} not found")
        log.info("writing %d task configs for %s sent by the worker running it", len(configs), name)
        self.config_store.put_task_configs(name, configs)

    def _handle(self, event: Any) -> None:
        if isinstance(event, tuple) and event[0] == "reconfigure":
            self._reconfigure_tasks(event[1])
            return
        if not isinstance(event, ConfigUpdate):
            return
        snapshot = self.config_store.snapshot()
        rejoin = False
        for c in sorted(event.removed):
            if c in self.running_connectors or any(t.connector == c for t in self.running_tasks):
                self._stop_units({c}, {t for t in self.running_tasks if t.connector == c})
                self.status_store.delete(c)          # after our last UNASSIGNED writes: tombstones
            rejoin = True
        for c in sorted(event.configs - event.removed):
            if c in self.running_connectors:
                log.info("connector %s reconfigured: restarting it", c)
                self.worker.stop_connector(c)
                if self.worker.start_connector(c, snapshot.connectors[c], snapshot.target(c)):
                    self._reconfigure_tasks(c)
            elif c not in self._known:
                rejoin = True                        # a new connector: the leader assigns it
        for c in sorted(event.tasks):
            configs = snapshot.tasks.get(c, [])
            changed = {t for t in self.running_tasks if t.connector == c
                       and (t.task >= len(configs) or self._started_with.get(t) != configs[t.task])}
            if changed:
                self._stop_units(set(), changed)     # restarted with their new configs after the rebalance
            rejoin = True
        for c in sorted(event.targets):
            self.worker.set_target_state(c, snapshot.target(c))
        for name, include_tasks, only_failed in event.restarts:
            self._restart_local(name, include_tasks, only_failed)
        self._known = set(snapshot.connectors)
        if rejoin:
            self.member.needs_rejoin = True

    def _restart_local(self, name: str, include_tasks: bool, only_failed: bool) -> None:
        snapshot = self.config_store.snapshot()
        if name not in snapshot.connectors:
            return
        restart_connector, tasks = self.restart_plan(name, include_tasks, only_failed)
        if restart_connector and name in self.running_connectors:
            self.worker.stop_connector(name)
            self.worker.put_status(st.Status(name, None, st.RESTARTING, self.worker.worker_id, self.generation))
            if self.worker.start_connector(name, snapshot.connectors[name], snapshot.target(name)):
                self._reconfigure_tasks(name)
        for t in tasks:
            tid = ConnectorTaskId(name, t)
            if tid in self.running_tasks:
                self._restart_task_here(tid, snapshot.connectors[name], snapshot.tasks[name][t], snapshot.target(name))

    def _restart_task_here(self, tid: ConnectorTaskId, connector_props: dict[str, str], task_props: dict[str, str],
                           target: str) -> None:
        self.worker.stop_tasks([tid])
        self.worker.put_status(st.Status(tid.connector, tid.task, st.RESTARTING, self.worker.worker_id,
                                         self.generation))
        self.worker.start_task(tid, connector_props, task_props, target)

    # -- REST writes ------------------------------------------------------------------------
    def _require_leader(self) -> None:
        if self.rebalancing and not self.ready:
            raise RebalanceNeededException("Request cannot be completed because a rebalance is expected")
        if not self.is_leader():
            raise NotLeaderException("Cannot complete request because this worker is not the leader",
                                     self.leader_url)

    def put_connector_config(self, name: str, props: Mapping[str, Any], allow_replace: bool
                             ) -> tuple[bool, dict[str, Any]]:
        self._require_leader()
        config = self.check_config(name, props)
        with self.lock:
            exists = name in self.state.connectors
        if exists and not allow_replace:
            raise AlreadyExistsException(f"Connector {name} already exists")
        self.config_store.put_connector_config(name, config)
        return not exists, self.connector_info(name)

    def delete_connector(self, name: str) -> None:
        self._require_leader()
        self._config(name)
        self.config_store.remove_connector_config(name)
        self.status_store.delete(name)
        self.status_store.delete_topics(name)

    def pause_connector(self, name: str) -> None:
        self._config(name)
        self.config_store.put_target_state(name, PAUSED)

    def resume_connector(self, name: str) -> None:
        self._config(name)
        self.config_store.put_target_state(name, STARTED)

    def restart_connector(self, name: str, include_tasks: bool = False, only_failed: bool = False
                          ) -> dict[str, Any] | None:
        self._require_leader()
        self._config(name)
        connector, tasks = self.restart_plan(name, include_tasks, only_failed)
        answer = self.restarting_status(name, connector, tasks) if (include_tasks or only_failed) else None
        self.config_store.put_restart_request(name, include_tasks, only_failed)
        return answer

    def restart_task(self, name: str, task: int) -> None:
        snapshot = self.config_store.snapshot()
        if name not in snapshot.connectors:
            raise NotFoundException(f"Connector {name} not found")
        if task < 0 or task >= len(snapshot.tasks.get(name, [])):
            raise NotFoundException(f"Task {name}-{task} not found")
        tid = ConnectorTaskId(name, task)
        if tid in self.running_tasks:
            self._restart_task_here(tid, snapshot.connectors[name], snapshot.tasks[name][task], snapshot.target(name))
            return
        if self.is_leader():
            owner = self.owners.get((name, task))
            if owner is None or owner == self.url:
                raise RebalanceNeededException("Cannot restart task: it is not assigned yet")
            raise NotLeaderException(f"Task {tid} is not owned by this worker", owner)
        raise NotLeaderException("Cannot complete request because this worker is not the leader", self.leader_url)
