"""``kafkalite-cluster up|status|kill|start|add-broker|decommission|rolling-restart|down``: a local cluster for experiments.

``up`` starts ZooKeeper (one server, or an ensemble with ``--zookeepers 3``), N brokers (ids
101.., as in the Kafka material) and a schema registry (unless ``--no-schema-registry``) detached
from the terminal, waits until ZooKeeper has a quorum, every broker is registered, a controller
is elected and the registry answers, and prints the bootstrap servers and the registry's URL. The
state file in the data directory lets the later commands find the processes; ``kill``/``start``
take a broker id or ``--zookeeper N``; ``add-broker`` starts one more broker with the next id;
``decommission ID`` moves every replica off that broker with a reassignment (optionally throttled),
waits until it is complete and says the broker may be stopped;
``rolling-restart`` restarts the brokers one at a time (controlled shutdown, then back and no
partition under-replicated before the next). Every error is one line on stderr (plus a log tail where
one helps) and exit code 1.
"""
from __future__ import annotations

import argparse
import os
import sys

from kafkalite.cli.common import SharedOptions
from kafkalite.cluster.local import DEFAULT_FIRST_ID, LocalCluster
from kafkalite.cluster.processes import ENSEMBLE_SIZES, SERVING_MODES, ClusterError

DEFAULT_DIR = os.environ.get("KAFKALITE_CLUSTER_DIR", "var/cluster")


def _overrides(items: list[str]) -> dict[str, str]:
    out = {}
    for item in items:
        key, sep, value = item.partition("=")
        if not sep or not key.strip():
            raise ClusterError(f"--override needs KEY=VALUE, got {item!r}")
        out[key.strip()] = value.strip()
    return out


def cmd_up(args: argparse.Namespace) -> int:
    if args.brokers < 1:
        raise ClusterError("--brokers must be at least 1")
    if args.first_id < 0:
        raise ClusterError("--first-id must be 0 or more (broker ids are non-negative)")
    if args.zookeepers is not None and args.zookeepers not in ENSEMBLE_SIZES:
        raise ClusterError(f"--zookeepers must be {', '.join(map(str, ENSEMBLE_SIZES[:-1]))} or "
                           f"{ENSEMBLE_SIZES[-1]} (an ensemble needs a majority alive), not {args.zookeepers}")
    try:
        existing = LocalCluster.load(args.data_dir)
    except ClusterError:
        existing = None
    if existing is not None and (existing.ensemble is not None and existing.ensemble.alive
                                 or any(b.alive for b in existing.brokers)
                                 or existing.registry is not None and existing.registry.alive
                                 or existing.console is not None and existing.console.alive
                                 or any(w.alive for w in existing.connect)):
        raise ClusterError(f"a cluster is already running in {existing.dir}; run `down` first")
    zookeepers = args.zookeepers or 1
    if existing is not None and existing.ensemble is not None:
        # the znodes of a stopped cluster live in its servers' dataDirs: start the same servers
        kept = existing.ensemble.size
        if args.zookeepers is not None and args.zookeepers != kept:
            raise ClusterError(f"{existing.dir} holds a ZooKeeper ensemble of {kept}: use --zookeepers {kept} "
                               f"(or `down --delete-data` to start afresh)")
        zookeepers = kept
    cluster = LocalCluster(args.data_dir, args.brokers, args.first_id, args.zookeeper_port, args.base_port,
                           _overrides(args.override), zookeepers=zookeepers,
                           schema_registry=args.schema_registry, schema_registry_port=args.schema_registry_port,
                           console=args.console, console_port=args.console_port,
                           connect_workers=args.connect, connect_port=args.connect_port,
                           sql=args.sql, sql_port=args.sql_port)
    servers = "ZooKeeper" if zookeepers == 1 else f"a ZooKeeper ensemble of {zookeepers}"
    registry = ", a schema registry" if args.schema_registry else ""
    if args.connect:
        registry += f", {args.connect} Connect worker(s)"
    if args.sql:
        registry += ", a SQL server"
    registry += " and the web console" if args.console else ""
    print(f"starting {servers}, {args.brokers} broker(s){registry} in {cluster.dir} ...", flush=True)
    cluster.up(args.timeout)
    try:
        controller = cluster.controller_id()
    finally:
        cluster.close_zk()
    assert cluster.ensemble is not None
    modes = cluster.ensemble.modes()
    for z in cluster.ensemble.servers:
        assert z.server_id is not None
        print(f"zookeeper {z.server_id:<9} {z.hosts}  {modes[z.server_id]:<10} pid {z.pid}  log {z.log_path}")
    print(f"zookeeper.connect   {cluster.zk_connect}")
    for b in cluster.brokers:
        print(f"broker {b.broker_id:<4}         {b.bootstrap}  pid {b.pid}  log {b.log_path}")
        if b.metrics_url:
            print(f"             metrics {b.metrics_url}  health {b.health_url}")
    print(f"controller          {controller}")
    if cluster.registry is not None:
        r = cluster.registry
        print(f"schema registry     {r.url}  pid {r.pid}  log {r.log_path}")
    if cluster.console is not None:
        c = cluster.console
        print(f"console             {c.url}  pid {c.pid}  log {c.log_path}")
    print(f"bootstrap servers   {cluster.bootstrap}")
    if cluster.registry is not None:
        print(f"schema.registry.url {cluster.registry.url}")
    for w in cluster.connect:
        print(f"connect worker      {w.url}  pid {w.pid}  log {w.log_path}")
    if cluster.connect:
        print(f"connect REST URL    {cluster.connect[0].url}")
    if cluster.sql is not None:
        print(f"sql server          {cluster.sql.url}  pid {cluster.sql.pid}  log {cluster.sql.log_path}")
        print(f"sql server URL      {cluster.sql.url}")
    if cluster.console is not None:
        print(f"console URL         {cluster.console.url}")
    return 0


def cmd_status(args: argparse.Namespace) -> int:
    cluster = LocalCluster.load(args.data_dir)
    try:
        st = cluster.status()
    finally:
        cluster.close_zk()
    print(f"cluster in {cluster.dir}")
    if cluster.ensemble is None:
        print(f"  zookeeper   external ({cluster.zk_connect})")
    for z in st.zookeepers:
        print(f"  zookeeper {z.server_id:<3} {z.mode:<11} pid {z.pid if z.pid else '-':<7} port {z.port}")
    if len(st.zookeepers) > 1:
        serving = sum(z.mode in SERVING_MODES for z in st.zookeepers)
        leader = next((z.server_id for z in st.zookeepers if z.mode == "leader"), None)
        quorum = (f"quorum, leader {leader}" if st.zookeeper_alive
                  else f"NO QUORUM (needs {len(st.zookeepers) // 2 + 1})")
        print(f"zookeeper ensemble: {serving} of {len(st.zookeepers)} serving, {quorum}")
    for b in cluster.brokers:
        alive, pid, port = st.processes[b.broker_id]
        reg = "registered" if b.broker_id in st.registered else "not registered"
        if not alive and b.broker_id in st.registered:
            reg += " (old session not expired yet)"
        print(f"  broker {b.broker_id:<4} {'alive' if alive else 'dead ':5}  pid {pid if pid else '-':<7} "
              f"port {port}  {reg}")
        if b.metrics_url:
            print(f"              metrics {b.metrics_url}  health {b.health_url}")
    if st.schema_registry is not None:
        alive, pid, url = st.schema_registry
        state = "alive" if alive else ("not answering" if pid else "dead ")
        print(f"  schema registry {state:5}  pid {pid if pid else '-':<7} {url}")
    for w in cluster.connect:
        state = "alive" if w.alive and w.answers() else ("not answering" if w.alive else "dead ")
        print(f"  connect worker  {state:5}  pid {w.pid if w.alive else '-':<7} {w.url}")
    if cluster.sql is not None:
        q = cluster.sql
        state = "alive" if q.alive and q.answers() else ("not answering" if q.alive else "dead ")
        print(f"  sql server      {state:5}  pid {q.pid if q.alive else '-':<7} {q.url}")
    if st.console is not None:
        alive, pid, url = st.console
        print(f"  console         {'up' if alive else 'down':5}  pid {pid if pid else '-':<7} {url}")
    if not st.zookeeper_alive:
        if len(st.zookeepers) > 1 and any(z.mode != "down" for z in st.zookeepers):
            print("ZooKeeper has no quorum: no controller or partition information (brokers keep "
                  "serving the leaderships they hold; nothing changes until a majority is back)")
        else:
            print("ZooKeeper is not running: no controller or partition information")
        return 0
    note = ""
    if st.controller is not None and not st.processes.get(st.controller, (True,))[0]:
        note = " (its process is dead; a new controller is elected when its session expires)"
    print(f"controller: {st.controller if st.controller is not None else 'none'}{note}")
    urp = st.under_replicated
    print(f"partitions: {len(st.partitions)}, under-replicated: {len(urp)}, offline: {len(st.offline)}")
    for p in urp[: args.limit]:
        print(f"  under-replicated {p.topic}-{p.partition}: leader {p.leader} replicas {p.replicas} isr {p.isr}")
    if len(urp) > args.limit:
        print(f"  ... and {len(urp) - args.limit} more")
    for p in st.offline[: args.limit]:
        print(f"  offline {p.topic}-{p.partition}: leader {p.leader} replicas {p.replicas} isr {p.isr}")
    return 0


def _target(args: argparse.Namespace) -> None:
    """Exactly one of a broker id and ``--zookeeper N``."""
    if (args.broker is None) == (args.zookeeper is None):
        raise ClusterError(f"{args.command} needs a broker id or --zookeeper N (one of them)")


def cmd_kill(args: argparse.Namespace) -> int:
    _target(args)
    cluster = LocalCluster.load(args.data_dir)
    if args.zookeeper is not None:
        was_leader = cluster.zookeeper_server(args.zookeeper).mode() in ("leader", "standalone")
        pid = cluster.kill_zookeeper(args.zookeeper)
        assert cluster.ensemble is not None
        ens = cluster.ensemble
        running = sum(s.alive for s in ens.servers)
        if ens.size == 1:
            effect = "ZooKeeper is down: brokers keep serving their leaderships, nothing else changes until it is back"
        elif running >= ens.quorum_size:
            effect = (f"{running} of {ens.size} servers run, the quorum holds"
                      + ("; the others elect a new leader" if was_leader else ""))
        else:
            effect = (f"only {running} of {ens.size} servers run: NO QUORUM; brokers keep serving their "
                      "leaderships, nothing else changes until a majority is back")
        print(f"zookeeper {args.zookeeper} killed (kill -9, pid {pid}); {effect}")
        return 0
    pid = cluster.kill_broker(args.broker)
    print(f"broker {args.broker} killed (kill -9, pid {pid}); its ZooKeeper session expires after "
          f"zookeeper.session.timeout.ms, then the controller moves its leaderships")
    return 0


def cmd_start(args: argparse.Namespace) -> int:
    _target(args)
    cluster = LocalCluster.load(args.data_dir)
    if args.zookeeper is not None:
        z = cluster.start_zookeeper_server(args.zookeeper, args.timeout)
        print(f"zookeeper {args.zookeeper} started on {z.hosts} (pid {z.pid}), {z.mode()}")
        return 0
    try:
        b = cluster.start_broker(args.broker, args.timeout)
    finally:
        cluster.close_zk()
    print(f"broker {b.broker_id} started on {b.bootstrap} (pid {b.pid})")
    return 0


def cmd_add_broker(args: argparse.Namespace) -> int:
    cluster = LocalCluster.load(args.data_dir)
    try:
        b = cluster.add_new_broker(args.port, args.timeout)
    finally:
        cluster.close_zk()
    print(f"broker {b.broker_id} started on {b.bootstrap} (pid {b.pid}, log {b.log_path}); it holds no partitions "
          f"until a reassignment moves some onto it (kafkalite-reassign-partitions)")
    print(f"bootstrap servers   {cluster.bootstrap}")
    return 0


def cmd_decommission(args: argparse.Namespace) -> int:
    from kafkalite.cli.common import ToolError
    from kafkalite.cli.reassign_partitions import drain
    from kafkalite.client import Admin, ClientError

    cluster = LocalCluster.load(args.data_dir)
    try:
        cluster.broker(args.broker)
    except ClusterError:
        raise ClusterError(f"broker {args.broker} is not part of this cluster") from None
    try:
        with Admin(cluster.bootstrap) as admin:
            plan = drain(admin, args.broker, args.timeout, args.throttle, say=lambda m: print(m, flush=True))
    except (ToolError, ClientError) as exc:
        raise ClusterError(str(exc)) from None
    finally:
        cluster.close_zk()
    if plan:
        print(f"moved {len(plan)} replica(s) off broker {args.broker}")
    print(f"broker {args.broker} holds no partitions: it may be stopped "
          f"(kafkalite-cluster --data-dir {args.data_dir} kill {args.broker})")
    return 0


def cmd_rolling_restart(args: argparse.Namespace) -> int:
    if args.timeout <= 0:
        raise ClusterError("--timeout must be positive")
    cluster = LocalCluster.load(args.data_dir)
    try:
        order = cluster.rolling_restart(args.timeout, progress=lambda msg: print(msg, flush=True))
    finally:
        cluster.close_zk()
    print(f"rolling restart complete: brokers {', '.join(map(str, order))}; no partition under-replicated")
    return 0


def cmd_down(args: argparse.Namespace) -> int:
    try:
        cluster = LocalCluster.load(args.data_dir)
    except ClusterError:
        print(f"nothing running (no cluster state in {os.path.abspath(args.data_dir)})")
        return 0
    stopped = cluster.down(args.timeout)
    print(f"stopped: {', '.join(stopped)}" if stopped else "nothing running")
    if args.delete_data:
        cluster.delete_data()
        print(f"deleted {cluster.dir}")
    else:
        print(f"data and logs kept in {cluster.dir}")
    return 0


def _global_options(p: argparse.ArgumentParser) -> None:
    p.add_argument("--data-dir", default=DEFAULT_DIR,
                   help=f"cluster directory (default {DEFAULT_DIR}, or $KAFKALITE_CLUSTER_DIR)")


#: --data-dir, before or after the subcommand
GLOBAL_OPTIONS = SharedOptions(_global_options)


def build_parser() -> argparse.ArgumentParser:
    ap = argparse.ArgumentParser(prog="kafkalite-cluster", description=__doc__.splitlines()[0])
    sub = GLOBAL_OPTIONS.subcommands(ap, dest="command", required=True)
    up = sub.add_parser("up", help="start ZooKeeper, the brokers and a schema registry, wait until ready")
    up.add_argument("--brokers", "-n", type=int, default=3, help="number of brokers (default 3)")
    up.add_argument("--first-id", type=int, default=DEFAULT_FIRST_ID, help="id of the first broker (default 101)")
    up.add_argument("--base-port", type=int, default=0, help="broker i listens on BASE+i (default: free ports)")
    up.add_argument("--zookeepers", type=int, metavar="N",
                    help=f"ZooKeeper servers: 1 (default) or an ensemble of {' or '.join(map(str, ENSEMBLE_SIZES[1:]))} "
                         "(a stopped cluster's directory keeps its own number)")
    up.add_argument("--zookeeper-port", type=int, default=0,
                    help="ZooKeeper client port of server 1, server N on PORT+N-1 (default: free ports)")
    up.add_argument("--override", action="append", default=[], metavar="KEY=VALUE",
                    help="broker property for every broker (repeatable)")
    up.add_argument("--no-schema-registry", dest="schema_registry", action="store_false",
                    help="do not start a schema registry (by default one starts after the brokers)")
    up.add_argument("--schema-registry-port", type=int, default=0,
                    help="the registry's HTTP port on 127.0.0.1 (default: a free port)")
    up.add_argument("--connect", type=int, default=0, metavar="N",
                    help="start N Kafka Connect workers in distributed mode (group connect-cluster) after the "
                         "brokers and print their REST URL")
    up.add_argument("--connect-port", type=int, default=0, metavar="PORT",
                    help="worker i's REST API on 127.0.0.1:PORT+i (Kafka Connect's default is 8083; "
                         "default: free ports)")
    up.add_argument("--sql", action="store_true",
                    help="start kafkalite-sql-server (streaming SQL on a local Spark) after the brokers and print "
                         "its URL, for kafkalite-sql")
    up.add_argument("--sql-port", type=int, default=0, metavar="PORT",
                    help="the SQL server's port on 127.0.0.1 (ksqlDB's default is 8088; default: a free port)")
    up.add_argument("--no-console", dest="console", action="store_false",
                    help="do not start the web console (by default kafkalite-console starts last)")
    up.add_argument("--console-port", type=int, default=0,
                    help="the console's HTTP port on 127.0.0.1 (default: a free port)")
    up.add_argument("--timeout", type=float, default=90.0, help="seconds to wait for readiness")
    up.set_defaults(fn=cmd_up)
    st = sub.add_parser("status", help="ZooKeeper servers' modes, brokers, controller, under-replicated partitions")
    st.add_argument("--limit", type=int, default=20, help="partitions listed at most")
    st.set_defaults(fn=cmd_status)
    k = sub.add_parser("kill", help="kill -9 one broker (or one ZooKeeper server)")
    k.add_argument("broker", type=int, nargs="?", help="broker id")
    k.add_argument("--zookeeper", type=int, metavar="N", help="the ZooKeeper server with myid N instead")
    k.set_defaults(fn=cmd_kill)
    s = sub.add_parser("start", help="start one stopped broker (or ZooKeeper server) again")
    s.add_argument("broker", type=int, nargs="?", help="broker id")
    s.add_argument("--zookeeper", type=int, metavar="N", help="the ZooKeeper server with myid N instead")
    s.add_argument("--timeout", type=float, default=90.0)
    s.set_defaults(fn=cmd_start)
    a = sub.add_parser("add-broker", help="start one more broker with the next id (no partitions until reassigned)")
    a.add_argument("--port", type=int, default=0, help="its listener port (default: a free port)")
    a.add_argument("--timeout", type=float, default=90.0)
    a.set_defaults(fn=cmd_add_broker)
    dc = sub.add_parser("decommission", help="move every replica off a broker (a reassignment), then say it may stop")
    dc.add_argument("broker", type=int, help="broker id")
    dc.add_argument("--throttle", type=int, default=-1, metavar="BYTES/S",
                    help="replication throttle for the moves (removed when they are complete)")
    dc.add_argument("--timeout", type=float, default=600.0, help="seconds to wait for the moves (default 600)")
    dc.set_defaults(fn=cmd_decommission)
    rr = sub.add_parser("rolling-restart",
                        help="restart every broker in turn (controlled shutdown), waiting for full ISRs in between")
    rr.add_argument("--timeout", type=float, default=120.0,
                    help="seconds each broker may take to stop, to come back and to rejoin every ISR (default 120)")
    rr.set_defaults(fn=cmd_rolling_restart)
    d = sub.add_parser("down", help="stop everything (idempotent)")
    d.add_argument("--timeout", type=float, default=30.0, help="grace period before SIGKILL")
    d.add_argument("--delete-data", action="store_true", help="also delete the data directory")
    d.set_defaults(fn=cmd_down)
    return ap


def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    return GLOBAL_OPTIONS.parse_args(build_parser(), argv)


def main(argv: list[str] | None = None) -> int:
    args = parse_args(argv)
    try:
        return args.fn(args)
    except ClusterError as exc:
        print(f"kafkalite-cluster: {exc}", file=sys.stderr)
        return 1
    except KeyboardInterrupt:
        print("kafkalite-cluster: interrupted", file=sys.stderr)
        return 130


if __name__ == "__main__":
    sys.exit(main())
