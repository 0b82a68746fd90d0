"""The engine (ksqlDB's ``KsqlEngine`` + ``CommandRunner``): statements in, REST entities out.

DDL and persistent-query statements are validated, appended to the command topic, then applied
(in command-topic order) to the metastore; a persistent query becomes a Spark Structured Streaming
query: the kafkalite source reads the input topic, its key and value are decoded per the
source's formats into a temporary view, the SELECT runs as Spark SQL over it (windowed
aggregates through Spark's ``window``/``session_window`` with a watermark of the grace period),
and the kafkalite sink writes the result exactly once. On start the engine replays the command
topic, so a restarted server rebuilds its streams, tables and queries, each query resuming from
its checkpoint under ``ksql.streams.state.dir``. The SQL server is a client of the brokers (over
kafkalite's client) and of Spark; nothing here runs inside a broker.
"""
from __future__ import annotations

import json
import logging
import re
import shutil
import threading
import time
import uuid
from dataclasses import replace
from pathlib import Path
from typing import Any, Callable, Mapping

from kafkalite.client import KafkaClient
from kafkalite.client import TopicPartition
from kafkalite.client.admin import Admin, NewTopic
from kafkalite.client.consumer import Consumer
from kafkalite.client.producer import Producer
from kafkalite.errors import ErrorCode
from kafkalite.sql import ast, avro_keys, deserialization, expression_types, inserts, kafka_format, printing, serde, windowed
from kafkalite.sql import processing_log, schema_ids
from kafkalite.sql import joins as join_rules
from kafkalite.sql.command_topic import CommandTopic
from kafkalite.sql.config import KsqlConfig
from kafkalite.sql.errors import BAD_REQUEST, BAD_STATEMENT, QUERY_ENDPOINT, KsqlError
from kafkalite.sql.metastore import FORMATS, DataSource, MetaStore, PersistentQuery
from kafkalite.sql.parser import parse
from kafkalite.sql.queries import (StateStore, TransientQuery, await_sources, decode_output, evaluate, json_value,
                                   ksql_type)
from kafkalite.sql.table_state import GroupIndex, TableState, group_key
from kafkalite.sql.translate import (PSEUDO, WINDOW_BOUNDS, Columns, Scope, column_types, columns_of,
                                     from_wire, has_aggregate, literal, map_columns, map_of_entries,
                                     output_name, quote, spark_column, spark_type, sql_type_of_spark, to_spark,
                                     to_wire)

log = logging.getLogger(__name__)

Entity = dict[str, Any]
#: ksqlDB's grace period for windows and stream-stream joins without GRACE PERIOD (0.2x: 24 hours)
DEFAULT_GRACE_MS = 24 * 3600 * 1000
#: Spark's setting that, true (its default), filters a stateful operator's late input with the
#: watermark of the micro-batch before the current one (``Engine._start_stream`` says why not)
ALLOW_MULTIPLE = "spark.sql.streaming.statefulOperator.allowMultiple"
#: held while a streaming query starts: ``_start_stream`` changes a session setting around it
_START_LOCK = threading.Lock()
VERSION = "0.29.0-kafkalite"


class Engine:
    def __init__(self, config: KsqlConfig, spark: Any | Callable[[], Any]) -> None:
        self.config = config
        self._spark = spark
        self.metastore = MetaStore()
        self.commands = CommandTopic(config.bootstrap_servers, config.service_id, security=config.security)
        self.running: dict[str, Any] = {}             # query id -> Spark StreamingQuery
        self.statuses: dict[str, str] = {}            # command id -> SUCCESS / ERROR (ksqlDB's /status)
        self.stores: dict[str, StateStore] = {}       # table name -> its CTAS query's latest rows
        self.table_states: dict[str, list[TableState]] = {}   # query id -> the tables' rows it keeps
        self.transient: dict[str, TransientQuery] = {}  # running push queries by id
        self.plans: dict[str, tuple[QueryPlan, str]] = {}  # persistent query id -> its plan and Spark SQL
        self.last_sequence = -1                        # the command topic's last offset applied
        self.restarts: dict[str, int] = {}             # persistent query id -> restarts after failures
        self.internal_topics: dict[str, str] = {}      # query id -> its join's internal (repartition) topic
        self._stopping = threading.Event()             # the server is shutting down: restart nothing
        self.replayed = False                          # start() has applied the command topic
        self._lock = threading.RLock()
        # INSERT VALUES and every /inserts-stream write through one producer, made on first use
        self.inserts_producer = inserts.SharedProducer(self._make_inserts_producer)

    # -- lifecycle ------------------------------------------------------------------------
    @property
    def spark(self) -> Any:
        if callable(self._spark) and not hasattr(self._spark, "readStream"):
            self._spark = self._spark()
        return self._spark

    def start(self) -> int:
        """Create the command topic if needed and replay it (ksqlDB's startup recovery);
        returns the number of commands replayed. Queries terminated later in the log never start.
        As ksqlDB's ``KsqlRestApplication.initialize``: the processing-log topic is created (and
        written to) before the replay, its stream issued after it."""
        self.commands.ensure()
        self._start_processing_log()
        history = self.commands.read_all()
        parsed = [(c, parse(c.statement)[0]) for c in history]
        terminated = {p.statement.query_id for _, p in parsed if isinstance(p.statement, ast.Terminate)}
        for command, stmt in parsed:
            self.last_sequence = max(self.last_sequence, command.offset)
            try:
                self._apply(stmt, command.streams_properties, command.offset, replay_terminated=terminated)
                self.statuses[command.command_id] = "SUCCESS"
            except KsqlError as exc:
                self.statuses[command.command_id] = "ERROR"
                log.error("replaying command %d (%s) failed: %s", command.offset, command.command_id, exc.message)
        log.info("replayed %d commands from %s", len(history), self.commands.topic)
        self.replayed = True
        self._create_processing_log_stream()
        return len(history)

    @property
    def processing_log_topic(self) -> processing_log.ProcessingLogTopic | None:
        """Where processing-log messages are produced: ``ksql.logging.processing.topic.name``
        with ``ksql.logging.processing.topic.auto.create=true``, else nowhere (None)."""
        if not self.config.processing_log_topic_auto_create:
            return None
        return processing_log.ProcessingLogTopic(self.config.bootstrap_servers, self.config.processing_log_topic,
                                                 self.config.security_properties)

    @property
    def read_only_topics(self) -> tuple[str, ...]:
        """Topics no query writes into (ksqlDB's ``ReservedInternalTopics.isReadOnly``): the
        command topic and the processing-log topic (whether or not the server writes to it)."""
        return self.commands.topic, self.config.processing_log_topic

    def _start_processing_log(self) -> None:
        """ksqlDB's ``maybeCreateProcessingLogTopic``, plus its Kafka appender in this process."""
        target = self.processing_log_topic
        if target is None:
            return
        processing_log.ensure_topic(target, self.config.processing_log_topic_partitions,
                                    self.config.processing_log_topic_replication_factor)
        processing_log.attach(target)

    def _create_processing_log_stream(self) -> None:
        """ksqlDB's ``maybeCreateProcessingLogStream``: its CREATE STREAM through the statement path
        (so it is in the command topic), unless a stream of that name exists (one replayed from
        the command topic included); an error is logged, the server starts anyway."""
        if not self.config.processing_log_stream_auto_create:
            return
        name = self.config.processing_log_stream_name
        existing = self.metastore.get(name) or self.metastore.get(name.upper())    # unquoted: upper case
        if existing is not None and existing.kind == "STREAM":
            return
        try:
            self.execute(processing_log.stream_statement(name, self.config.processing_log_topic))
            log.info("created processing log stream %s", name)
        except KsqlError as exc:
            log.error("Error while creating the processing log stream %s: %s", name, exc.message)

    def stop(self) -> None:
        self._stopping.set()
        for tq in list(self.transient.values()):
            tq.close()
        self.transient.clear()
        with self._lock:
            for qid, q in list(self.running.items()):
                try:
                    q.stop()
                except Exception as exc:                  # a failed Spark query may refuse to stop cleanly
                    log.warning("stopping %s: %s", qid, exc)
            self.running.clear()
        self.inserts_producer.close()
        self.commands.close()
        if self.processing_log_topic is not None:
            processing_log.detach(self.processing_log_topic)

    # -- statements -----------------------------------------------------------------------
    def execute(self, text: str, properties: dict[str, Any] | None = None) -> list[Entity]:
        """Every statement of a /ksql request, in order; the first error stops the request."""
        props = dict(properties or {})
        out: list[Entity] = []
        for stmt in parse(text):
            try:
                entity = self.execute_one(stmt, props)
            except KsqlError as exc:
                exc.entities = out                        # ksqlDB's error lists the entities so far
                raise
            if entity is not None:
                out.append(entity)
        return out

    def execute_one(self, stmt: ast.ParsedStatement, props: dict[str, Any]) -> Entity | None:
        """One statement; None for those ksqlDB answers with no entity (SET, UNSET, INSERT VALUES).
        ``props`` are the request's properties: a SET changes them for the later statements of the
        same request (ksqlDB's ``PropertyExecutor`` on the request's session properties)."""
        s = stmt.statement
        if isinstance(s, ast.Show):
            return self._show(s, stmt.text, props)
        if isinstance(s, ast.Describe):
            return self._describe(s, stmt.text)
        if isinstance(s, ast.Explain):
            return self._explain(s, stmt.text, props)
        if isinstance(s, ast.SetProperty):
            if s.value is None:
                props.pop(s.name, None)
            else:
                props[s.name] = s.value
            return None
        if isinstance(s, ast.InsertValues):
            self._insert_values(s, stmt.text)
            return None
        if isinstance(s, (ast.Query, ast.Print)):
            raise KsqlError("The following statement types should be issued to the websocket endpoint '/query':"
                            "\n\t* PRINT\n\t* SELECT", statement=stmt.text, code=QUERY_ENDPOINT)
        with self._lock:
            self._validate(s, stmt.text)
            if isinstance(s, ast.Drop) and s.delete_topic:
                stmt = self._delete_topic(stmt, s)
                s = stmt.statement
            seq = self.commands.append(_command_id(s), stmt.text, {k: str(v) for k, v in props.items()})
            self.last_sequence = max(self.last_sequence, seq)
            try:
                entity = self._apply(stmt, props, seq)
            except KsqlError:
                self.statuses[_command_id(s)] = "ERROR"
                raise
            self.statuses[_command_id(s)] = "SUCCESS"
            return entity

    # -- transient queries (/query, /query-stream) -------------------------------------------
    def query(self, text: str, properties: dict[str, Any] | None = None) -> TransientQuery:
        """One SELECT: a push query (EMIT CHANGES) is started and returned running (rows go to
        its listener); a pull query is answered at once from the table's state store."""
        statements = parse(text)
        if len(statements) == 1 and isinstance(statements[0].statement, ast.Print):
            return self._print(statements[0].statement, statements[0].text)
        if len(statements) != 1 or not isinstance(statements[0].statement, ast.Query):
            raise KsqlError("The /query endpoint accepts exactly one SELECT or PRINT statement",
                            statement=statements[0].text if statements else text)
        stmt = statements[0]
        q = statements[0].statement.query
        props = dict(properties or {})
        if q.emit == "CHANGES":
            return self._push(statements[0].statement, stmt.text, props)
        _check_pull(q, stmt.text)
        if self.metastore.require(q.source, stmt.text).kind == "STREAM":
            return self._stream_pull(statements[0].statement, stmt.text, props)
        return self._pull(q, stmt.text)

    def close_query(self, query_id: str) -> bool:
        tq = self.transient.pop(query_id, None)
        if tq is None:
            return False
        tq.close()
        return True

    def _push(self, query: ast.Query, text: str, props: dict[str, Any]) -> TransientQuery:
        """A push query is planned and compiled as a persistent query is (one pipeline); its rows
        go to the client instead of a topic: every row for a stream, every changed row of an
        aggregate (Spark's update mode; session windows once closed, as in persistent queries)."""
        tq_id = f"transient_{query.query.source}_{uuid.uuid4().int % 10**18}"
        plan = self._plan(query, text, props, tq_id)
        q = plan.select
        if plan.upstream is not None:                     # an aggregate over a join: the join first
            self._start_upstream(plan, text)
        compiled, _ = self._compile(plan)
        join = compiled if isinstance(compiled, TableJoin) else None
        table_aggregate = compiled if isinstance(compiled, TableAggregate) else None
        columns = [quote(n) for n, _ in plan.items]
        if join is not None or table_aggregate is not None:
            result = join.stream if join is not None else compiled.changes
            types = self._plan_types(plan)
            names, kinds = [n for n, _ in plan.items], [types.get(n, "STRING") for n, _ in plan.items]
        else:
            result = compiled.select(*columns)
            names, kinds = _names_and_types(result)
        tq = TransientQuery(text, names, kinds, q.limit, push=True)
        tq.id = tq_id

        def each_batch(batch: Any, batch_id: int) -> None:
            if not tq.closed:
                try:
                    rows = (join.per_batch(batch).select(*columns) if join is not None else batch).collect()
                finally:
                    if join is not None:
                        join.release()
                tq.offer([[json_value(v) for v in r] for r in rows])

        def offer_changes(frame: Any, batch_id: int, tombstones: bool) -> None:
            """A table aggregate's changed rows (a deleted row is not pushed)."""
            if not tq.closed:
                tq.offer([[json_value(r[n]) for n in names] for r in frame.collect() if not r["__tombstone"]])
        if table_aggregate is not None:
            each_batch = self._table_aggregate_batch(plan, table_aggregate,  # type: ignore[assignment]
                                                     self._table_aggregate_store(plan, False), offer_changes)
        update = plan.aggregate and table_aggregate is None and (q.window is None or q.window.kind != "SESSION")
        running = self._start_stream(result.writeStream.queryName(tq_id).outputMode("update" if update else "append")
                                     .foreachBatch(each_batch).trigger(processingTime="200 milliseconds"), plan)

        def stop() -> None:
            self.transient.pop(tq_id, None)
            running.stop()
            self.table_states.pop(tq_id, None)
            if plan.upstream is not None:
                self._stop_upstream(plan)
        tq._stop = stop
        self.transient[tq_id] = tq
        # the first micro-batch fixes the starting offsets: once it has run, every record produced
        # after the client got the header reaches it (ksqlDB's push queries start from "latest" too)
        try:
            running.processAllAvailable()
        except Exception as exc:
            tq.close()
            first = str(exc).strip().splitlines()[0] if str(exc).strip() else type(exc).__name__
            raise KsqlError(f"Push query failed to start: {first}", statement=text) from None
        threading.Thread(target=self._watch, args=(tq, running), name=f"watch-{tq_id}", daemon=True).start()
        log.info("push query %s started over %s", tq_id, plan.source.topic)
        return tq

    def _start_upstream(self, plan: "QueryPlan", text: str) -> None:
        """A push query's join feeding its aggregate: its internal topic, then the join as a
        transient Spark query writing to it, past its first micro-batch (so its starting offsets
        are fixed before the client gets the header). A failure stops what was started."""
        upstream = plan.upstream
        assert upstream is not None
        try:
            self._ensure_sink_topic(upstream, text)
            feeding = plan
            while feeding.upstream is not None:
                self.internal_topics[feeding.query_id] = feeding.upstream.sink.topic
                feeding = feeding.upstream
            self._run(upstream)
            self.running[upstream.query_id].processAllAvailable()
        except Exception as exc:
            self._stop_upstream(plan)
            raise KsqlError(f"Push query failed to start: {_first_line(exc)}", statement=text) from None

    def _stop_upstream(self, plan: "QueryPlan") -> None:
        """A closed push query's join: stopped, its checkpoint and its internal topic deleted
        (ksqlDB cleans up a transient query's internal topics and state when it closes)."""
        feeding = plan
        while feeding.upstream is not None:               # the join's queries, each with its topic
            running = self.running.pop(feeding.upstream.query_id, None)
            if running is not None:
                running.stop()
            shutil.rmtree(Path(self.config.state_dir) / self.config.service_id / feeding.upstream.query_id,
                          ignore_errors=True)
            self._delete_internal_topics(feeding.query_id)
            feeding = feeding.upstream

    @staticmethod
    def _plan_types(plan: "QueryPlan") -> dict[str, str]:
        """A stream-table join's column types for a push query's header, before any batch ran:
        the sources' declared types (a computed column is Spark's to decide: STRING here)."""
        return {c.name: _ksql_name(c.type) for c in plan.sink.columns}

    def _print(self, s: ast.Print, text: str) -> TransientQuery:
        """PRINT: the topic's records as text lines, streamed until LIMIT or the client leaves."""
        with self._client() as client:
            topics = sorted(client.metadata(None).topics)
        topic = printing.resolve_topic(s, topics, text)
        tq = TransientQuery(text, [], [], None, push=True, printing=True)
        avro = self._avro_text if self.config.schema_registry_url else None
        printer = printing.TopicPrinter(self.config.bootstrap_servers, self.config.security, topic, s, tq, avro)
        stop_printer = tq._stop

        def stop() -> None:
            self.transient.pop(tq.id, None)
            stop_printer()
        tq._stop = stop
        self.transient[tq.id] = tq
        printer.start()
        return tq

    def _avro_text(self, data: bytes) -> str | None:
        """A registry-framed Avro value as JSON text (PRINT's AVRO format), None if it is not one."""
        datum = self._avro_decoder()(data)
        # as ksqlDB's PRINT shows a deserialized object: a string as it is, a record as JSON
        return None if datum is None else datum if isinstance(datum, str) else json.dumps(json_value(datum))

    def _avro_decoder(self) -> Callable[[bytes], Any]:
        """Decodes registry-framed Avro values (None for one that is not: not framed, an unknown
        id, not its schema), each writer schema fetched from the registry once."""
        from kafkalite.registry.client import RegistryClient
        from kafkalite.registry.serde import decode, parse_avro

        registry = RegistryClient(str(self.config.schema_registry_url))
        schemas: dict[int, Any] = {}

        def lookup(schema_id: int) -> Any:
            if schema_id not in schemas:
                registered = registry.by_id(schema_id)
                schemas[schema_id] = registered, parse_avro(registered.schema, registered.dependencies)
            return schemas[schema_id]

        def datum(data: bytes) -> Any:
            try:
                return decode(data, lookup)[2]
            except Exception:
                return None
        return datum

    @staticmethod
    def _watch(tq: TransientQuery, running: Any) -> None:
        """Ends the client's response if the Spark query stops on its own (a failure), so that
        no push query hangs open without a query behind it."""
        try:
            running.awaitTermination()
        except Exception as exc:
            first = str(exc).strip().splitlines()[0] if str(exc).strip() else type(exc).__name__
            log.error("push query %s failed: %s", tq.id, first)
            if not tq.closed:
                tq.error = first
        tq.close()

    def _stream_pull(self, query: ast.Query, text: str, props: dict[str, Any]) -> TransientQuery:
        """ksqlDB 0.23+'s pull query on a stream, a scan of what the stream holds now: its topic
        read (read_committed) from the start to the end each partition has when the query starts,
        as a Spark batch over the same decoded view a push query streams from, through the same
        projection and WHERE (any expression a push query takes); the rows in each partition's
        offset order, up to LIMIT, answered at once."""
        q = query.query
        plan = self._plan(query, text, props, f"query_{q.source}_{uuid.uuid4().int % 10**18}")
        frame, _ = self._compile(plan, batch=True)
        result = frame.select(*[quote(n) for n, _ in plan.items])
        if q.limit is not None:
            result = result.limit(q.limit)
        names, kinds = _names_and_types(result)
        try:
            rows = [[json_value(v) for v in r] for r in result.collect()]
        except Exception as exc:                          # e.g. ksql.fail.on.deserialization.error
            raise KsqlError(f"Pull query failed: {_first_line(exc)}", statement=text) from None
        finally:
            # its view, named by this query's id, serves no later query: left in the session's
            # catalog, every pull query would add one more
            self.spark.catalog.dropTempView(_view_name(plan))
        return TransientQuery(text, names, kinds, q.limit, push=False, rows=rows)

    def _pull(self, q: ast.Select, text: str) -> TransientQuery:
        src = self.metastore.require(q.source, text)
        store = self.stores.get(src.name)
        if store is None and src.window is not None and not self._written_by_query(src):
            store = self._windowed_table_now(src)
        if store is None:
            raise KsqlError(_not_queryable(src.name), statement=text)
        names: list[str] = []
        for index, item in enumerate(q.items):
            if item.expr is None:
                names += store.column_names
            elif isinstance(item.expr, ast.Column) and item.expr.name in store.column_names:
                names.append(item.expr.name)
            else:
                raise KsqlError("Pull queries select columns of the table only", statement=text)
        where = q.where
        rows = store.scan(lambda r: where is None or bool(evaluate(where, r, text)))
        position = {c: i for i, c in enumerate(store.column_names)}
        rows = [[json_value(r[position[n]]) for n in names] for r in rows]
        if q.limit is not None:
            rows = rows[:q.limit]
        types = dict(zip(store.column_names, store.column_types))
        return TransientQuery(text, names, [types[n] for n in names], q.limit, push=False, rows=rows)

    def _written_by_query(self, src: DataSource) -> bool:
        """Is ``src`` the sink of a CREATE ... AS SELECT, running or terminated? (Its own statement
        is the query's; a table declared over a topic later under the same name is not.)"""
        return any(q.sink == src.name and q.statement == src.statement for q in self.metastore.queries.values())

    # -- server information -----------------------------------------------------------------
    def info(self) -> Entity:
        """ksqlDB's ``KsqlServerInfo``."""
        try:
            with self._client() as client:
                cluster_id = client.metadata([]).cluster_id
        except Exception as exc:                          # the brokers are down: still answer /info
            log.warning("/info: no cluster id: %s", exc)
            cluster_id = None
        return {"version": VERSION, "kafkaClusterId": cluster_id, "ksqlServiceId": self.config.service_id,
                "serverStatus": "RUNNING"}

    def health(self) -> Entity:
        """ksqlDB's ``HealthCheckResponse``: the brokers answer Metadata, and the command runner
        has replayed the command topic. As in ksqlDB (``HealthCheckAgent``'s commandRunner check is
        the command runner's status), a persistent query in ERROR, waiting to be restarted, does not
        make the server unhealthy: SHOW QUERIES and EXPLAIN show it."""
        try:
            with self._client() as client:
                client.metadata([])
            kafka = True
        except Exception as exc:
            log.warning("healthcheck: brokers unreachable: %s", exc)
            kafka = False
        runner = self.replayed
        return {"isHealthy": kafka and runner, "details": {"metastore": {"isHealthy": True},
                                                           "kafka": {"isHealthy": kafka},
                                                           "commandRunner": {"isHealthy": runner}}}

    def command_statuses(self) -> dict[str, str]:
        return dict(self.statuses)

    def _validate(self, s: ast.Statement, text: str) -> None:
        """What ksqlDB's sandbox would refuse, checked before the command is logged."""
        ms = self.metastore
        if isinstance(s, (ast.CreateSource, ast.CreateAsSelect)):
            _check_read_only(s, ms.get(s.name), text)
            if ms.get(s.name) is not None and not (s.if_not_exists or s.or_replace):
                existing = ms.sources[s.name]
                raise KsqlError(f"Cannot add {s.kind.lower()} '{s.name}': A {existing.kind.lower()} with the same "
                                "name already exists", statement=text)
            if isinstance(s, ast.CreateSource):
                source = self._source_of(s, text)           # property and column checks, no side effects
                if s.prop("PARTITIONS") is None and not self._topic_exists(source.topic):
                    self._ensure_topic(source.topic, None, None, text)     # raises ksqlDB's message
                if source.value_format == "AVRO" and any(not c.key for c in s.columns):
                    self._register_declared_avro(source.topic, s.columns, text, source.value_schema_full_name)
                if source.key_format == "AVRO" and any(c.key for c in s.columns):
                    self._register_declared_avro_key(source, text)
                for schema_id, is_key in ((source.key_schema_id, True), (source.value_schema_id, False)):
                    if schema_id is not None:             # SchemaRegisterInjector: the id's schema, raw
                        schema_ids.register_raw(str(self.config.schema_registry_url), source.topic, schema_id,
                                                self._schema_by_id(source.topic, schema_id, is_key, text), is_key,
                                                text)
            else:
                plan = self._plan(s, text, {}, "validate")    # the statement's query must plan
                if not (s.if_not_exists and ms.get(s.name) is not None):     # else nothing is created
                    self._register_outputs(plan, text)
        elif isinstance(s, ast.InsertInto):
            target = ms.get(s.target)
            if target is not None and target.topic in self.read_only_topics:     # ksqlDB's DistributingExecutor
                raise KsqlError(f"Cannot insert into read-only topic: {target.topic}", statement=text)
            self._plan(s, text, {}, "validate")
        elif isinstance(s, ast.Drop):
            if ms.get(s.name) is None and not s.if_exists:
                raise KsqlError(f"{s.kind.capitalize()} {s.name} does not exist.", statement=text)
            if ms.get(s.name) is not None:
                readers, writers = ms.readers_and_writers(s.name)
                if [r for r in readers if r not in ms.source_table_queries(s.name)] or writers:
                    ms.drop(s.name, statement=text)           # raises ksqlDB's message
        elif isinstance(s, ast.Terminate) and s.query_id is not None:
            q = ms.queries.get(s.query_id)
            if q is None or q.state == "TERMINATED":
                raise KsqlError(f"Unknown queryId: {s.query_id}", statement=text)

    def _apply(self, stmt: ast.ParsedStatement, props: dict[str, Any], seq: int,
               replay_terminated: set[str | None] | None = None) -> Entity:
        s = stmt.statement
        ms = self.metastore
        if isinstance(s, ast.CreateSource):
            if ms.get(s.name) is not None and s.if_not_exists:
                return _status(stmt.text, s, seq, f"Cannot add {s.kind.lower()} {s.name}: already exists")
            source = self._source_of(s, stmt.text)
            self._ensure_topic(source.topic, s.prop("PARTITIONS"), s.prop("REPLICAS"), stmt.text)
            ms.add(source, replace_existing=s.or_replace, statement=stmt.text)
            if source.read_only and source.kind == "TABLE":
                return self._materialize_source_table(source, stmt.text, s, seq, replay_terminated)
            return _status(stmt.text, s, seq, f"{s.kind.capitalize()} created")
        if isinstance(s, (ast.CreateAsSelect, ast.InsertInto)):
            if isinstance(s, ast.CreateAsSelect) and ms.get(s.name) is not None and s.if_not_exists:
                return _status(stmt.text, s, seq, f"Cannot add {s.kind.lower()} {s.name}: already exists")
            query_id = _query_id(s, seq)
            plan = self._plan(s, stmt.text, props, query_id)
            live = query_id not in (replay_terminated or ())    # a query terminated later gets no internal topic
            if isinstance(s, ast.CreateAsSelect):
                self._ensure_sink_topic(plan, stmt.text, live)
                ms.add(plan.sink, replace_existing=s.or_replace, statement=stmt.text)
            feeding = plan
            while feeding.upstream is not None and live:      # each internal topic, by the query writing it
                self.internal_topics[feeding.query_id] = feeding.upstream.sink.topic
                feeding = feeding.upstream
            ms.add_query(PersistentQuery(query_id, stmt.text, plan.sink.name, plan.source_names,
                                        properties=dict(props)))
            if replay_terminated is not None and query_id in replay_terminated:
                ms.queries[query_id].state = "TERMINATED"
            else:
                if replay_terminated is not None:
                    self._warn_without_checkpoint(query_id)
                try:
                    self._run(plan)
                except Exception as exc:          # Spark refused the plan (e.g. an unsupported output mode)
                    first = str(exc).strip().splitlines()[0] if str(exc).strip() else type(exc).__name__
                    ms.queries[query_id].state, ms.queries[query_id].error = "ERROR", first
                    log.error("query %s failed to start: %s", query_id, exc)
                    raise KsqlError(f"Query {query_id} failed to start: {first}", statement=stmt.text) from None
            status = _status(stmt.text, s, seq, f"Created query with ID {query_id}")
            status["commandStatus"]["queryId"] = query_id
            return status
        if isinstance(s, ast.Drop):
            if ms.get(s.name) is None:
                return _status(stmt.text, s, seq, f"Source {s.name} does not exist.")
            materializing = ms.source_table_queries(s.name)
            dropped = ms.drop(s.name, statement=stmt.text)
            for qid in materializing:                     # a SOURCE TABLE's own query goes with it
                self._terminate(qid)
            return _status(stmt.text, s, seq, f"Source `{s.name}` (topic: {dropped.topic}) was dropped.")
        if isinstance(s, ast.Terminate):
            ids = [s.query_id] if s.query_id else [q.id for q in ms.live_queries()]
            for qid in ids:
                if qid is None or qid not in ms.queries or ms.queries[qid].state == "TERMINATED":
                    continue
                self._terminate(qid)
            return _status(stmt.text, s, seq, "Query terminated.")
        raise KsqlError(f"Statement not executable: {stmt.text}", statement=stmt.text)

    def _warn_without_checkpoint(self, query_id: str) -> None:
        """A query replayed from the command topic with no checkpoint under this server's
        ``ksql.streams.state.dir`` starts over from ``auto.offset.reset``, which is right for a
        query whose server crashed before Spark made its checkpoint, and wrong for one that ran
        elsewhere. Why it is said loudly: ksqlDB's queries resume from offsets kept in Kafka, so
        a second server there may have a state directory of its own; ours resume from Spark's
        checkpoint files, so a server started on another directory (not the shared storage
        docs/sql.md asks for) would silently write the input again or, where the sink's batch
        markers are named by the query id, skip the new checkpoint's first batches as written."""
        checkpoint = Path(self.config.state_dir) / self.config.service_id / query_id
        if not (checkpoint / "offsets").exists():
            log.warning("query %s has no checkpoint in %s: it starts over from auto.offset.reset. If it ran "
                        "before under another ksql.streams.state.dir, its output may get records twice or miss "
                        "some: point this server at that directory (shared storage)", query_id, checkpoint)

    def _terminate(self, qid: str) -> None:
        """A persistent query stopped and marked TERMINATED, with what it owns: an aggregate's join
        query, its internal topics, a SOURCE TABLE's state store (its table is no longer queryable)."""
        q = self.metastore.terminate(qid)
        # an aggregate over a join: its join query too (over a split join: both of the join's queries)
        for rid in (qid, f"{qid}_JOIN", f"{qid}_JOIN_JOIN"):
            running = self.running.pop(rid, None)
            if running is not None:
                running.stop()
            self._delete_internal_topics(rid)
            self.table_states.pop(rid, None)
        if q.source_table:
            self.stores.pop(q.sources[0], None)
        elif q.sink in self.stores and not any(o.sink == q.sink for o in self.metastore.live_queries()):
            # its table is no longer materialized: pull queries are refused, as ksqlDB refuses
            # them once the registry has no query writing the table (not answered from a
            # state that stopped changing)
            self.stores.pop(q.sink)

    def _materialize_source_table(self, table: DataSource, text: str, s: ast.CreateSource, seq: int,
                                  replay_terminated: set[str | None] | None) -> Entity:
        """CREATE SOURCE TABLE as ksqlDB 0.22+ runs it: a query ``CST_<TABLE>_<n>`` with no sink
        that keeps the table's latest row per key in a state store, so pull queries work on it."""
        query_id = f"CST_{table.name}_{seq}"
        self.metastore.add_query(PersistentQuery(query_id, text, "", (table.name,), source_table=True))
        if replay_terminated is not None and query_id in replay_terminated:
            self.metastore.queries[query_id].state = "TERMINATED"
        else:
            plan = QueryPlan(query_id, table, table, ast.Select((ast.SelectItem(None),), table.name), [
                (c.name, ast.Column(c.name)) for c in table.value_columns],
                [ast.Column(c.name) for c in table.key_columns], [c.name for c in table.key_columns], False,
                "earliest")
            plan.materialize_only = True
            try:
                self._run(plan)
            except Exception as exc:
                first = _first_line(exc)
                self.metastore.queries[query_id].state, self.metastore.queries[query_id].error = "ERROR", first
                raise KsqlError(f"Query {query_id} failed to start: {first}", statement=text) from None
        status = _status(text, s, seq, f"Created query with ID {query_id}")
        status["commandStatus"]["queryId"] = query_id
        return status

    def _source_table_writer(self, plan: "QueryPlan") -> tuple[Any, Callable[[Any, int], None], str]:
        """A SOURCE TABLE's materializing stream: its topic from the start, each micro-batch's
        records applied in offset order to the table's state store (a tombstone deletes the key).
        A resumed query first reads the topic into the store up to where its stream goes on."""
        table = plan.source
        bounds = [] if table.window is None else list(WINDOW_BOUNDS)
        columns = list(table.key_columns) + [ast.ColumnDef(b, ast.SqlType("BIGINT")) for b in bounds] \
            + list(table.value_columns)
        names = [c.name for c in columns]
        store = StateStore([c.name for c in table.key_columns], bool(bounds), names,
                           [_ksql_name(c.type) for c in columns])
        until = _committed_offsets(Path(self.config.state_dir) / self.config.service_id / plan.query_id)
        if until is not None:
            # resumed: the table as its last committed batch left it, read through Spark as the
            # stream reads it and up to where the stream goes on, so no record is applied twice
            # (pull queries never see a key's older row again) and none decoded another way
            restored = TableState(store.key_names, store.windowed)
            self._read_changes(self.spark, table, restored, until)
            store.update([{n: r.get(n) for n in names} for r in restored.rows.values()])
        self.stores[table.name] = store
        frame = self._source_frame(table, "earliest", tombstones=True)

        def each_batch(batch: Any, batch_id: int) -> None:
            applied = store.apply_records(r.asDict() for r in batch.collect())
            log.debug("%s batch %d: %d records", plan.query_id, batch_id, applied)
        sql = f"SELECT * FROM {quote(table.name)} EMIT CHANGES"
        return frame, each_batch, sql

    def _delete_topic(self, stmt: ast.ParsedStatement, s: ast.Drop) -> ast.ParsedStatement:
        """DROP ... DELETE TOPIC as ksqlDB's ``TopicDeleteInjector`` does it, before the command is
        logged: refused while another source reads the same topic; the topic deleted, and for a
        registry format (AVRO) its ``<topic>-key`` and/or ``<topic>-value`` subject (a missing
        subject is no error); the
        statement logged without DELETE TOPIC, so a replay never deletes a topic made again later."""
        source = self.metastore.get(s.name)
        if source is not None and source.read_only:       # ksqlDB's DropSourceFactory
            raise KsqlError(f"Cannot delete topic for read-only source: {s.name}", statement=stmt.text)
        if source is not None:
            sharing = sorted(d.name for d in self.metastore.sources.values()
                             if d.topic == source.topic and d.name != source.name)
            if sharing:
                raise KsqlError(f"Refusing to delete topic. Found other data sources ({', '.join(sharing)}) using "
                                f"topic {source.topic}", statement=stmt.text)
            try:
                with Admin(self.config.bootstrap_servers, security=self.config.security) as admin:
                    admin.delete_topics([source.topic])
            except Exception as exc:
                raise KsqlError(f"Could not delete the corresponding kafka topic: {source.topic}",
                                statement=stmt.text) from exc
            subjects = [f"{source.topic}-{side}" for side, fmt in (("key", source.key_format),
                                                                   ("value", source.value_format)) if fmt == "AVRO"]
            if subjects and self.config.schema_registry_url:
                from kafkalite.registry.client import RegistryClient, RegistryClientError

                for subject in subjects:
                    try:
                        RegistryClient(self.config.schema_registry_url).delete_subject(subject)
                    except RegistryClientError as exc:
                        if exc.error_code != 40401:       # subject not found
                            raise KsqlError(f"Could not clean up the schema registry for topic: {source.topic}",
                                            statement=stmt.text) from None
        kept = replace(s, delete_topic=False)
        return ast.ParsedStatement(_DELETE_TOPIC.sub("", stmt.text.rstrip().rstrip(";")).rstrip() + ";", kept)

    # -- CREATE STREAM/TABLE ----------------------------------------------------------------
    def _source_of(self, s: ast.CreateSource, text: str) -> DataSource:
        props = {k.upper(): v for k, v in s.properties}
        known = {"KAFKA_TOPIC", "VALUE_FORMAT", "KEY_FORMAT", "FORMAT", "PARTITIONS", "REPLICAS", "TIMESTAMP",
                 "TIMESTAMP_FORMAT", "VALUE_DELIMITER", "KEY_DELIMITER", "WRAP_SINGLE_VALUE", "KEY_SCHEMA_ID",
                 "VALUE_SCHEMA_ID", "WINDOW_TYPE", "WINDOW_SIZE", *schema_ids.FULL_NAME_PROPS}
        unknown = sorted(set(props) - known)
        if unknown:
            raise KsqlError(f"Invalid config variable(s) in the WITH clause: {','.join(unknown)}", statement=text)
        topic = props.get("KAFKA_TOPIC")
        if not topic:
            raise KsqlError(f"Missing required property \"KAFKA_TOPIC\" for CREATE {s.kind}", statement=text)
        key_format, value_format = formats_of(props, "KAFKA", "", text)
        if not value_format:
            raise KsqlError("Statement is missing the 'VALUE_FORMAT' property from the WITH clause. Either provide "
                            "one or set a default via the 'ksql.persistence.default.format.value' config.",
                            statement=text)
        window = windowed.window_of(props, text)          # keys with Kafka Streams' window bytes
        for fmt in (value_format, key_format):
            if fmt not in FORMATS:
                raise KsqlError(f"Unknown format: {fmt}", statement=text)
        columns = tuple(s.columns)
        refusal = serde.format_refusal(columns, key_format, value_format)
        if refusal is not None:
            raise KsqlError(refusal, statement=text)
        key_name, value_name = schema_ids.full_names(props, key_format, value_format, text)
        key_id = schema_ids.requested(props, key_format, True, any(c.key for c in columns), text)
        value_id = schema_ids.requested(props, value_format, False, any(not c.key for c in columns), text)
        if key_id is not None:                            # DefaultSchemaInjector: the key from the id's schema
            columns = schema_ids.key_columns(str(topic), key_id, self._schema_by_id(str(topic), key_id, True, text),
                                             text) + columns
        elif key_format == "AVRO":
            columns = self._avro_key_columns(s.name, str(topic), columns, text, key_name) + tuple(
                c for c in columns if not c.key)
        if value_id is not None:                          # the value columns from the id's schema
            columns = columns + schema_ids.value_columns(str(topic), value_id,
                                                         self._schema_by_id(str(topic), value_id, False, text), text)
        elif value_format == "AVRO" and not [c for c in columns if not c.key]:
            columns = columns + self._avro_columns(str(topic), text)
        elif value_format == "AVRO":
            self._declared_avro_schema(str(topic), columns, text, value_name)   # checked before anything runs
        if not columns:
            raise KsqlError(f"The statement does not define any columns.", statement=text)
        names = [c.name for c in columns]
        dup = sorted({n for n in names if names.count(n) > 1})
        if dup:
            raise KsqlError(f"Duplicate column names: {', '.join(dup)}", statement=text)
        keys = [c for c in columns if c.key]
        if s.kind == "TABLE" and not keys:
            raise KsqlError("Tables require a PRIMARY KEY. Please define the PRIMARY KEY." + (
                "\nUse a partial schema to define the primary key and still load the value columns from the Schema "
                f"Registry, for example:\n\tCREATE TABLE {s.name} (ID INT PRIMARY KEY) WITH (...);"
                if value_id is not None else ""), statement=text)
        if len(keys) > 1 and key_format in ("KAFKA", "DELIMITED"):
            raise KsqlError(f"The '{key_format}' format only supports a single field. Got: "
                            f"[{', '.join(k.name for k in keys)}]", statement=text)
        timestamp = props.get("TIMESTAMP")
        if timestamp is not None:                         # an identifier: upper-cased unless back-quoted
            quoted = re.fullmatch(r"`((?:[^`]|``)+)`", str(timestamp))
            ts_name = quoted[1].replace("``", "`") if quoted else str(timestamp).upper()
            ts_col = next((c for c in columns if c.name == ts_name), None)
            if ts_col is None:
                raise KsqlError(f"The TIMESTAMP column set in the WITH clause does not exist in the schema: "
                                f"'{ts_name}'", statement=text)
            if ts_col.type.name not in ("BIGINT", "TIMESTAMP"):
                raise KsqlError(f"Timestamp column, `{ts_col.name}`, should be LONG(INT64) or TIMESTAMP",
                                statement=text)
            timestamp = ts_col.name
        ordered = tuple(keys) + tuple(c for c in columns if not c.key)
        return DataSource(s.name, s.kind, str(topic), ordered, key_format, value_format,
                          str(timestamp) if timestamp else None, window,
                          value_delimiter=str(props.get("VALUE_DELIMITER", ",")), key_schema_id=key_id,
                          value_schema_id=value_id, key_schema_full_name=key_name, value_schema_full_name=value_name,
                          statement=text, read_only=s.read_only)

    def _version_of_id(self, src: DataSource, is_key: bool) -> str:
        """The version of ``<topic>-key``/``-value`` holding the schema a KEY_SCHEMA_ID /
        VALUE_SCHEMA_ID names (registered there before the CREATE was logged), so queries read
        with the schema the columns came from, whatever was registered after it."""
        schema_id = src.key_schema_id if is_key else src.value_schema_id
        if schema_id is None or not self.config.schema_registry_url:
            return "latest"
        return str(schema_ids.version_of(self.config.schema_registry_url, src.topic, schema_id, is_key,
                                         src.statement))

    def _schema_by_id(self, topic: str, schema_id: int, is_key: bool, text: str) -> Any:
        """The registry schema a ``KEY_SCHEMA_ID``/``VALUE_SCHEMA_ID`` names (ksqlDB's refusals)."""
        return schema_ids.fetch(self.config.schema_registry_url, topic, schema_id, is_key, text)

    def _avro_columns(self, topic: str, text: str) -> tuple[ast.ColumnDef, ...]:
        if not self.config.schema_registry_url:
            raise KsqlError("Schema registry url is not set (ksql.schema.registry.url): cannot infer the "
                            "columns of an AVRO topic", statement=text)
        from kafkalite.registry.client import RegistryClient, RegistryClientError

        try:
            registered = RegistryClient(self.config.schema_registry_url).latest(f"{topic}-value")
        except RegistryClientError as exc:
            raise KsqlError(f"Schema for message values on topic '{topic}' does not exist in the Schema Registry."
                            f"Subject: {topic}-value ({exc})", statement=text) from None
        doc = json.loads(registered.schema)
        out = []
        for f in doc.get("fields", []):
            sql_type = serde.avro_sql_type(f["type"])
            if sql_type is None:
                raise KsqlError(f"Field {f['name']} of {topic}-value has an Avro type this server cannot map: "
                                f"{json.dumps(f['type'])}", statement=text)
            out.append(ast.ColumnDef(f["name"].upper(), sql_type))
        return tuple(out)

    def _avro_key_columns(self, name: str, topic: str, columns: tuple[ast.ColumnDef, ...],
                          text: str, full_name: str | None = None) -> tuple[ast.ColumnDef, ...]:
        """An AVRO key's columns: those declared (their schema checked, as ksqlDB's
        ``SchemaRegisterInjector`` would register it), else inferred from ``<topic>-key``."""
        declared = tuple(c for c in columns if c.key)
        if not self.config.schema_registry_url:
            raise KsqlError(f"Cannot create topic '{topic}' with format AVRO without configuring "
                            "'ksql.schema.registry.url'", statement=text)
        if declared:
            try:
                avro_keys.key_schema(name, declared, full_name)
            except ValueError as exc:
                raise KsqlError(f"Could not register schema for topic: {exc}", statement=text) from None
            return declared
        from kafkalite.registry.client import RegistryClient, RegistryClientError

        try:
            registered = RegistryClient(self.config.schema_registry_url).latest(avro_keys.subject(topic))
        except RegistryClientError as exc:
            if exc.error_code in (40401, 40402):
                raise KsqlError(avro_keys.missing_subject(topic), statement=text) from None
            raise KsqlError(f"Schema registry fetch for topic key request failed for topic: {topic}",
                            statement=text) from None
        try:
            return avro_keys.inferred_columns(topic, registered)
        except KsqlError as exc:
            raise KsqlError(str(exc), statement=text) from None

    def _register_declared_avro_key(self, source: DataSource, text: str) -> None:
        """The declared key columns' schema registered as ``<topic>-key`` unless the subject
        exists (ksqlDB's ``SchemaRegisterInjector``), before the command is logged."""
        from kafkalite.registry.client import RegistryClient, RegistryClientError

        client = RegistryClient(str(self.config.schema_registry_url))
        subject = avro_keys.subject(source.topic)
        try:
            client.latest(subject)
            return
        except RegistryClientError as exc:
            if exc.error_code not in (40401, 40402):          # subject / version not found
                raise KsqlError(f"Could not register schema for topic: {exc}", statement=text) from None
        try:
            client.register(subject, avro_keys.key_schema(source.name, source.key_columns, source.key_schema_full_name))
        except (ValueError, RegistryClientError) as exc:
            raise KsqlError(f"Could not register schema for topic: {exc}", statement=text) from None

    def _declared_avro_schema(self, topic: str, columns: tuple[ast.ColumnDef, ...], text: str,
                              full_name: str | None = None) -> str:
        """The Avro schema of declared value columns (the record named ``full_name``, default
        ksqlDB's), or ksqlDB's refusal (no registry, a type Avro cannot carry)."""
        if not self.config.schema_registry_url:
            raise KsqlError(f"Cannot create topic '{topic}' with format AVRO without configuring "
                            "'ksql.schema.registry.url'", statement=text)
        try:
            return serde.value_avro_schema(columns, full_name)
        except ValueError as exc:
            raise KsqlError(f"Could not register schema for topic: {exc}", statement=text) from None

    def _register_declared_avro(self, topic: str, columns: tuple[ast.ColumnDef, ...], text: str,
                                full_name: str | None = None) -> None:
        """ksqlDB's ``SchemaRegisterInjector`` for CREATE STREAM/TABLE with declared columns:
        the columns' schema registered as ``<topic>-value`` unless the subject already exists.
        Like the injector it runs before the command is logged, so a replay never needs the
        registry."""
        from kafkalite.registry.client import RegistryClient, RegistryClientError

        schema = self._declared_avro_schema(topic, columns, text, full_name)
        client = RegistryClient(str(self.config.schema_registry_url))
        try:
            client.latest(f"{topic}-value")
            return
        except RegistryClientError as exc:
            if exc.error_code not in (40401, 40402):          # subject / version not found
                raise KsqlError(f"Could not register schema for topic: {exc}", statement=text) from None
        try:
            client.register(f"{topic}-value", schema)
        except RegistryClientError as exc:
            raise KsqlError(f"Could not register schema for topic: {exc}", statement=text) from None

    def _topic_exists(self, topic: str) -> bool:
        with self._client() as client:
            md = client.metadata([topic])
        t = md.topics.get(topic)
        return t is not None and t.error == ErrorCode.NONE

    def _ensure_topic(self, topic: str, partitions: object, replicas: object, text: str) -> None:
        if self._topic_exists(topic):
            return
        if partitions is None:
            raise KsqlError(f"Topic '{topic}' does not exist. If you want to create a new topic for the "
                            "stream/table please re-run the statement providing the required 'PARTITIONS' "
                            "configuration in the WITH clause (and optionally 'REPLICAS').", statement=text)
        try:
            count, rf = int(str(partitions)), int(str(replicas)) if replicas is not None else -1
        except ValueError:
            raise KsqlError("PARTITIONS and REPLICAS must be numbers", statement=text) from None
        with Admin(self.config.bootstrap_servers, security=self.config.security) as admin:
            err = admin.create_topics([NewTopic(topic, count, rf)])[topic]
        if err is not None and err.code != ErrorCode.TOPIC_ALREADY_EXISTS:
            raise KsqlError(f"Could not create topic '{topic}': {err}", statement=text)

    # -- persistent queries -----------------------------------------------------------------
    def _check_select(self, kind: str, properties: tuple[tuple[str, object], ...], q: ast.Select,
                      src: DataSource, known: "set[str] | Scope", text: str, table_join: bool = False) -> None:
        """ksqlDB's checks of a SELECT; an aggregate or a table-table join (``table_join``)
        produces a TABLE, anything else a STREAM."""
        if q.window is not None and not q.group_by:
            raise KsqlError("WINDOW clause requires a GROUP BY clause.", statement=text)
        aggregate = q.group_by or any(has_aggregate(i.expr) for i in q.items) or table_join
        if kind == "STREAM" and aggregate:
            raise KsqlError("Invalid result type. Your SELECT query produces a TABLE. Please use CREATE TABLE AS "
                            "SELECT statement instead.", statement=text)
        if kind == "TABLE" and not aggregate:
            raise KsqlError("Invalid result type. Your SELECT query produces a STREAM. Please use CREATE STREAM "
                            "AS SELECT statement instead.", statement=text)
        if q.partition_by is not None and aggregate:
            raise KsqlError("PARTITION BY and GROUP BY in the same query is not supported.", statement=text)
        for e in [i.expr for i in q.items if i.expr is not None] + [q.where, q.partition_by, q.having,
                                                                     *q.group_by]:
            if e is not None:
                to_spark(e, known, text)                   # unknown columns and functions fail here
        if q.where is not None and has_aggregate(q.where):
            raise KsqlError("WHERE clause can not contain aggregate functions; use HAVING", statement=text)
        for fmt in formats_of({k.upper(): v for k, v in properties}, src.key_format, src.value_format, text):
            if fmt not in FORMATS:
                raise KsqlError(f"Unknown format: {fmt}", statement=text)

    def _plan(self, s: ast.CreateAsSelect | ast.InsertInto | ast.Query, text: str, props: dict[str, Any],
              query_id: str, source: DataSource | None = None) -> "QueryPlan":
        """A persistent query's plan (no side effects): its source, its sink (a new stream or
        table for CSAS/CTAS, the existing stream for INSERT INTO), the projected items and the key.
        ``source`` stands for the FROM source (an aggregate over a join reads the join's topic)."""
        ms = self.metastore
        target = ms.require(s.target, text) if isinstance(s, ast.InsertInto) else None
        if target is not None and target.kind != "STREAM":
            raise KsqlError(f"INSERT INTO can only be used to insert into a stream. {target.name} is a table.",
                            statement=text)
        if target is not None and target.read_only:       # ksqlDB's EngineExecutor
            raise KsqlError(f"Cannot insert into read-only {target.kind.lower()}: {target.name}", statement=text)
        q = s.query
        aggregate = bool(q.group_by) or any(has_aggregate(i.expr) for i in q.items)
        kind = s.kind if isinstance(s, ast.CreateAsSelect) else "TABLE" if isinstance(s, ast.Query) and aggregate \
            else "STREAM"
        src = source or ms.require(q.source, text)
        properties = () if isinstance(s, ast.Query) else s.properties
        if isinstance(s, ast.Query) and q.partition_by is not None:
            raise KsqlError("PARTITION BY is not supported in push queries", statement=text)
        split = None if source is not None else self._table_column_split(q, src, text)
        if split is not None and aggregate:      # the split join is the aggregate's upstream query
            return self._plan_join_aggregate(s, text, props, query_id, src, [
                (j, ms.require(j.source, text), j.alias or j.source) for j in q.joins], split=True)
        if split is not None:                    # ksqlDB repartitions the stream-table join's output
            return self._plan_split_join(s, text, props, query_id, src, split)
        joins = self._join_sources(q, src, aggregate, text)
        if not isinstance(s, ast.Query) and source is None:
            join_rules.check_persistent_sources([src] + [d for _, d, _ in joins], text)
        if joins and aggregate:
            return self._plan_join_aggregate(s, text, props, query_id, src, joins)
        if aggregate and src.kind == "TABLE":
            join_rules.check_table_aggregate(q, text)
        left = q.alias or src.name
        sources = [(left, src)] + [(alias, right) for _, right, alias in joins]
        types = {c.name: c.type for c in src.columns} if not joins else {
            f"{a}.{c.name}": c.type for a, d in sources for c in d.columns}
        scope: set[str] | Scope = Scope(((left, _columns_in_scope(src)),) + tuple(
            (alias, _columns_in_scope(right)) for _, right, alias in joins), types) \
            if joins else Columns({c.name for c in src.columns} | set(PSEUDO) | (
                set(WINDOW_BOUNDS) if q.window or src.window else set()), types)
        if not joins:
            windowed.check_repartition(src.window, q.partition_by, [k.name for k in src.key_columns], text)
        synthetic = _synthetic_key(src, joins, left)
        if synthetic is not None:                 # a FULL OUTER table-table join: ROWKEY is COALESCE of the keys
            q = replace(q, items=tuple(replace(i, expr=synthetic) if i.expr == ast.Column("ROWKEY") else i
                                       for i in q.items))
        table_join = bool(joins) and src.kind == "TABLE"
        if isinstance(s, ast.Query) and table_join:
            kind = "TABLE"
        self._check_select(kind, properties, q, src, scope, text, table_join)
        with_props = {k.upper(): v for k, v in properties}
        items: list[tuple[str, ast.Expr]] = []
        for index, item in enumerate(q.items):
            if item.expr is None:
                items += ([(f"{a}_{c.name}", ast.Column(c.name, a)) for a, d in sources for c in d.columns]
                          if joins else [(c.name, ast.Column(c.name)) for c in _star_columns(src, s)])
            else:
                items.append((output_name(item, index), item.expr))
        if aggregate:
            key_exprs = list(q.group_by)
        elif q.partition_by is not None:
            key_exprs = [q.partition_by]
        elif joins and src.kind == "TABLE":
            key_exprs = _table_join_key(src, joins, left, items, synthetic, s, text)
        elif joins:
            key_exprs = _join_key(joins[0][0], items, scope, kind, s, text)
        else:
            key_exprs = [ast.Column(k.name) for k in src.key_columns if any(
                isinstance(e, ast.Column) and e.name == k.name for _, e in items)]
        key_names: list[str] = []
        for e in key_exprs:
            match = next((n for n, x in items if x == e), None)
            key_names.append(match or (e.name if isinstance(e, ast.Column) else f"KSQL_KEY_{len(key_names)}"))
        value_items = [(n, e) for n, e in items if n not in key_names]
        # (name, key?, type): a computed column's type (None) is Spark's to decide
        def type_of(e: ast.Expr) -> ast.SqlType | None:
            return expression_types.type_of(e, column_types(scope), text)
        typed = [(n, True, type_of(e)) for n, e in zip(key_names, key_exprs)] + [
            (n, False, type_of(e)) for n, e in value_items]
        sink_columns = tuple(ast.ColumnDef(n, t or ast.SqlType("STRING"), key=k) for n, k, t in typed)
        if target is not None:
            _check_insert_schema(typed, target, text)
            windowed.check_insert_window(target, q.window or _kept_window(src, aggregate, joins), text)
            sink = target
        else:
            name = s.name if isinstance(s, ast.CreateAsSelect) else query_id
            key_format, value_format = formats_of(with_props, src.key_format, src.value_format, text)
            key_name, value_name = schema_ids.full_names(with_props, key_format, value_format, text)
            key_id = schema_ids.requested(with_props, key_format, True, False, text) \
                if isinstance(s, ast.CreateAsSelect) else None
            value_id = schema_ids.requested(with_props, value_format, False, False, text) \
                if isinstance(s, ast.CreateAsSelect) else None
            sink = DataSource(name, kind, str(with_props.get("KAFKA_TOPIC") or name), sink_columns,
                              key_format, value_format, None, q.window or _kept_window(src, aggregate, joins),
                              key_schema_id=key_id, value_schema_id=value_id, key_schema_full_name=key_name,
                              value_schema_full_name=value_name, statement=text)
            refusal = serde.format_refusal([c for c, (_, _, t) in zip(sink_columns, typed) if t is not None],
                                           sink.key_format, sink.value_format)
            if refusal is not None and isinstance(s, ast.CreateAsSelect):   # a type its formats cannot carry
                raise KsqlError(refusal, statement=text)
        plan = QueryPlan(query_id, src, sink, q, items, key_exprs, key_names, aggregate,
                         str(props.get("auto.offset.reset") or props.get("ksql.streams.auto.offset.reset")
                             or self.config.streams_property("auto.offset.reset", "latest")), with_props,
                         joins, scope)
        plan.output_types = {n: t for n, _, t in typed}
        return plan

    def _plan_join_aggregate(self, s: ast.CreateAsSelect | ast.InsertInto | ast.Query, text: str,
                             props: dict[str, Any], query_id: str, src: DataSource,
                             joins: list[tuple[ast.Join, DataSource, str]], split: bool = False) -> "QueryPlan":
        """An aggregate over a join, as ksqlDB runs it (the join, then a repartition topic the
        aggregate reads): the join (with WHERE) is a query of its own, ``<id>_JOIN``, writing every
        column of every source as ``ALIAS_COL`` to the internal topic
        ``_confluent-ksql-<service id>query_<id>-Join-repartition`` exactly once, with the joined
        record's event time; the aggregate reads that topic from the start, its expressions
        naming those columns. The aggregate's plan carries the join's as ``upstream``. A push
        query's join is a transient query of its own, its topic ``..transient_<id>-Join-repartition``.
        A table-table join's output is a table (its key, with tombstones for rows gone), so its
        aggregate is a table aggregate (``TableAggregate``), as ksqlDB's KGroupedTable. With
        ``split`` (a stream-stream join after a stream-table join on a table column), the join is
        itself two queries through an internal topic (``_plan_split_join``): three queries in all,
        ``<id>_JOIN_JOIN`` -> ``<id>_JOIN`` -> ``<id>``, the joins validated by the join's plan."""
        q = s.query
        left = q.alias or src.name
        sources = [(left, src)] + [(a, d) for _, d, a in joins]
        items = tuple(ast.SelectItem(ast.Column(c.name, a), f"{a}_{c.name}") for a, d in sources for c in d.columns)
        kind = src.kind                                   # a table-table join's output is a table
        if _synthetic_key(src, joins, left) is not None:  # a FULL OUTER table join is keyed by ROWKEY
            items = (ast.SelectItem(ast.Column("ROWKEY"), "ROWKEY"),) + items
        if kind == "TABLE":
            join_rules.check_table_aggregate(q, text)
        topic = join_rules.repartition_topic(self.config.service_id, query_id)
        join_id = f"{query_id}_JOIN"
        upstream = self._plan(ast.CreateAsSelect(kind, join_id, (("KAFKA_TOPIC", topic), ("VALUE_FORMAT", "JSON")),
                                                 ast.Select(items, q.source, q.alias, where=q.where, joins=q.joins)),
                              text, props, join_id)
        joined = DataSource(join_id, kind, topic, upstream.sink.columns, upstream.sink.key_format, "JSON",
                            statement=text)
        # the sources' columns as the statement names them (a split join's scope is its second query's)
        scope = upstream.scope if not split else Scope(tuple((a, _columns_in_scope(d)) for a, d in sources), {
            f"{a}.{c.name}": c.type for a, d in sources for c in d.columns})

        def rename(c: ast.Column) -> ast.Expr:
            if c.name in PSEUDO:
                return ast.Column(c.name)                 # the joined record's: the left source's
            owner = _qualified(c, scope).source
            if owner is None:
                raise KsqlError(f"Column '{c.name}' cannot be resolved.", statement=text)
            return ast.Column(f"{owner}_{c.name}")
        renamed = tuple(replace(i, expr=map_columns(i.expr, rename),
                                alias=i.alias or output_name(i, index)) if i.expr is not None else i
                        for index, i in enumerate(q.items))
        select = replace(q, items=renamed, source=join_id, alias=None, where=None, joins=(),
                         group_by=tuple(map_columns(e, rename) for e in q.group_by),
                         having=None if q.having is None else map_columns(q.having, rename))
        return self._plan_downstream(s, select, text, props, query_id, src, joined, upstream)

    def _plan_downstream(self, s: ast.CreateAsSelect | ast.InsertInto | ast.Query, select: ast.Select, text: str,
                         props: dict[str, Any], query_id: str, src: DataSource, joined: DataSource,
                         upstream: "QueryPlan") -> "QueryPlan":
        """The second half of a query split at an internal ``-Join-repartition`` topic: ``select``
        reads ``joined`` (the upstream query's output) from the start; a persistent one writes in
        the statement's formats, else its first source's (the internal topic is JSON)."""
        if isinstance(s, ast.Query):
            plan = self._plan(replace(s, query=select), text, props, query_id, joined)
        else:
            formats = {k.upper() for k, _ in s.properties}
            properties = s.properties + tuple((k, v) for k, v in (("VALUE_FORMAT", src.value_format),
                                                                   ("KEY_FORMAT", src.key_format))
                                              if k not in formats and "FORMAT" not in formats)
            plan = self._plan(replace(s, query=select, properties=properties), text, props, query_id, joined)
        plan.upstream, plan.offset_reset = upstream, "earliest"
        feeding: QueryPlan | None = upstream
        while feeding is not None:                        # every query feeding it lives and dies with it
            feeding.owner, feeding = query_id, feeding.upstream
        return plan

    def _table_column_split(self, q: ast.Select, src: DataSource, text: str) -> int | None:
        """The index of the first stream-stream join whose ON names a column of a table joined
        before it (``s JOIN t ON ... JOIN o WITHIN ... ON t.v = o.v``), None if there is none (or
        the joins are malformed: ``_join_sources`` then says how)."""
        lefts: list[tuple[str, DataSource]] = [(q.alias or src.name, src)]
        for index, j in enumerate(q.joins):
            right = self.metastore.get(j.source)
            if right is None or not (isinstance(j.on, ast.Binary) and isinstance(j.on.left, ast.Column)
                                     and isinstance(j.on.right, ast.Column)):
                return None
            alias = j.alias or right.name
            if right.kind == "STREAM" and index > 0:
                try:
                    _, other = _join_sides(j.on, alias, right, lefts, text)
                except KsqlError:
                    return None
                owner = next((d for a, d in lefts if a == other.source), None)
                if owner is not None and owner.kind == "TABLE":
                    return index
            lefts.append((alias, right))
        return None

    def _plan_split_join(self, s: ast.CreateAsSelect | ast.InsertInto | ast.Query, text: str,
                         props: dict[str, Any], query_id: str, src: DataSource, split: int) -> "QueryPlan":
        """A stream-stream join after a stream-table join whose ON names a table column, as ksqlDB
        runs it (it repartitions the stream-table join's output by that column): the joins before
        ``split`` are a query of their own, ``<id>_JOIN``, writing every column as ``ALIAS_COL``
        exactly once to the internal topic ``..-Join-repartition`` (as an aggregate over a join
        does); the query reads that topic as a stream from the start and runs the remaining joins,
        its expressions naming those columns. The plan carries the first query as ``upstream``."""
        q = s.query
        left = q.alias or src.name
        prefix = [(left, src)] + [(j.alias or j.source, self.metastore.require(j.source, text))
                                  for j in q.joins[:split]]
        suffix = [(j.alias or j.source, self.metastore.require(j.source, text)) for j in q.joins[split:]]
        items = tuple(ast.SelectItem(ast.Column(c.name, a), f"{a}_{c.name}") for a, d in prefix for c in d.columns)
        topic = join_rules.repartition_topic(self.config.service_id, query_id)
        join_id = f"{query_id}_JOIN"
        upstream = self._plan(ast.CreateAsSelect("STREAM", join_id, (("KAFKA_TOPIC", topic), ("VALUE_FORMAT", "JSON")),
                                                 ast.Select(items, q.source, q.alias, joins=q.joins[:split])),
                              text, props, join_id)
        joined = DataSource(join_id, "STREAM", topic, upstream.sink.columns, upstream.sink.key_format, "JSON",
                            statement=text)
        mine = {a: d for a, d in prefix}
        later = {a: d for a, d in suffix}

        def rename(c: ast.Column) -> ast.Expr:
            owner = c.source if c.source is not None else next(
                (a for a, d in prefix if d.column(c.name) is not None), None)
            if owner not in mine or (c.source is None and any(d.column(c.name) for d in later.values())):
                return c                                  # a later source's (or ambiguous: said later)
            if c.name in PSEUDO:
                return ast.Column(c.name, join_id)        # the joined record's: the left stream's
            return ast.Column(f"{owner}_{c.name}")
        renamed: list[ast.SelectItem] = []
        for index, i in enumerate(q.items):
            if i.expr is None:                            # SELECT *: every source's columns as ALIAS_COL
                renamed += [ast.SelectItem(ast.Column(f"{a}_{c.name}"), f"{a}_{c.name}") for a, d in prefix
                            for c in d.columns]
                renamed += [ast.SelectItem(ast.Column(c.name, a), f"{a}_{c.name}") for a, d in suffix
                            for c in d.columns]
            else:
                renamed.append(replace(i, expr=map_columns(i.expr, rename), alias=i.alias or output_name(i, index)))
        select = replace(q, items=tuple(renamed), source=join_id, alias=None,
                         where=None if q.where is None else map_columns(q.where, rename),
                         joins=tuple(replace(j, on=map_columns(j.on, rename)) for j in q.joins[split:]))
        if not isinstance(s, ast.Query):
            join_rules.check_persistent_sources([d for _, d in suffix], text)
        return self._plan_downstream(s, select, text, props, query_id, src, joined, upstream)

    def _join_sources(self, q: ast.Select, left: DataSource, aggregate: bool,
                      text: str) -> list[tuple[ast.Join, DataSource, str]]:
        """The joined sources with their aliases, refused in ksqlDB's words (0.29's
        ``LogicalPlanner.verifyJoin``) where ksqlDB refuses the join's shape. What runs:
        stream-stream joins (WITHIN), a stream joined with one or more tables, and tables joined
        with tables (on primary keys, n-way, or one foreign-key join of two tables)."""
        out: list[tuple[ast.Join, DataSource, str]] = []
        aliases = [q.alias or left.name]
        left_kind = left.kind                       # the kind of everything joined so far
        for j in q.joins:
            right = self.metastore.require(j.source, text)
            alias = j.alias or right.name
            if alias in aliases:
                raise KsqlError(f"Can not join '{right.name}' to '{right.name}': self joins are not yet supported.",
                                statement=text)
            kinds = (left_kind, right.kind)
            shape = {"STREAM": "Stream", "TABLE": "Table"}
            got = f"Got {left.name} {_JOIN_WORDS[j.kind]} {right.name}."
            if kinds == ("STREAM", "STREAM") and j.within is None:
                raise KsqlError("Stream-Stream joins must have a WITHIN clause specified. None was provided. To "
                                "learn about how to specify a WITHIN clause with a stream-stream join, please "
                                "visit: https://docs.confluent.io/current/ksql/docs/syntax-reference.html"
                                "#create-stream-as-select", statement=text)
            if kinds != ("STREAM", "STREAM") and j.within is not None:
                raise KsqlError(f"A window definition was provided for a {shape[kinds[0]]}-{shape[kinds[1]]} join. "
                                "These joins are not windowed. Please drop the window definition (ie. the WITHIN "
                                "clause) and try to execute your join again.", statement=text)
            if kinds == ("TABLE", "STREAM"):
                raise KsqlError(f"Invalid join order: table-stream joins are not supported; only stream-table "
                                f"joins. {got}", statement=text)
            if kinds == ("STREAM", "TABLE") and j.kind in ("FULL", "RIGHT"):
                raise KsqlError(f"Invalid join type: {'full-outer' if j.kind == 'FULL' else 'right'} join not "
                                f"supported for stream-table join. {got}", statement=text)
            if not (isinstance(j.on, ast.Binary) and j.on.op == "=" and isinstance(j.on.left, ast.Column)
                    and isinstance(j.on.right, ast.Column)):
                raise KsqlError(f"Unsupported join expression: {_expr_text(j.on)}. ksqlDB joins on an equality "
                                "of one column of each source.", statement=text)
            assert isinstance(j.on, ast.Binary)
            mine, other = _join_sides(j.on, alias, right, [(q.alias or left.name, left)] + [(a, d) for _, d, a in out],
                                      text)
            lefts = [(q.alias or left.name, left)] + [(a, d) for _, d, a in out]
            join_rules.check_join_windowing(next((d for a, d in lefts if a == other.source), left), str(other.source),
                                            right, alias, text)
            join_rules.check_mixed_joins(lefts, j, right, other, text)
            windowed.check_join_key(next((d for a, d in lefts if a == other.source), left), other, right, mine,
                                    text)
            condition = f"{_expr_text(other)} = {_expr_text(mine)}"
            pk = [c.name for c in right.key_columns]
            if right.kind == "TABLE" and mine.name not in pk:
                what = ("table-table joins require to join on the primary key of the right input table"
                        if left_kind == "TABLE" else "stream-table joins require to join on the table's primary key")
                raise KsqlError(f"Invalid join condition: {what}. Got {condition}.", statement=text)
            if kinds == ("TABLE", "TABLE"):
                self._check_table_join(j, q, left, right, other, mine, condition, got, out, text)
            out.append((j, right, alias))
            aliases.append(alias)
            left_kind = "TABLE" if kinds == ("TABLE", "TABLE") else "STREAM"
        return out

    def _check_table_join(self, j: ast.Join, q: ast.Select, left: DataSource, right: DataSource, other: ast.Column,
                          mine: ast.Column, condition: str, got: str, out: list[tuple[ast.Join, DataSource, str]],
                          text: str) -> None:
        """A table-table join's refusals: a left side that is not a primary key makes a
        foreign-key join (no FULL OUTER, two tables only, the types of both sides equal)."""
        left_source = next((d for _, d, a in out if other.source == a), left)
        left_col = left_source.column(other.name)
        right_col = right.column(mine.name)
        foreign = left_col is None or not left_col.key
        if foreign:
            if j.kind == "FULL":
                raise KsqlError(f"Invalid join type: full-outer join not supported for foreign-key table-table "
                                f"join. {got}", statement=text)
            if out or len(q.joins) > 1:
                raise KsqlError(f"Invalid join condition: foreign-key table-table joins are not supported as part "
                                f"of n-way joins. Got {condition}.", statement=text)
            if right.window is not None:
                raise KsqlError("Foreign-key table-table joins are not supported on windowed tables.", statement=text)
        if left_col is not None and right_col is not None and left_col.type != right_col.type:
            raise KsqlError(f"Invalid join condition: types don't match. Got {_expr_text(other)}"
                            f"{{{_ksql_name(left_col.type)}}} = {_expr_text(mine)}{{{_ksql_name(right_col.type)}}}.",
                            statement=text)

    def _ensure_sink_topic(self, plan: "QueryPlan", text: str, internal: bool = True) -> None:
        """A CSAS/CTAS's output topic, created with PARTITIONS (default: as many as the source's);
        an aggregate over a join first creates the join's internal topic (with ``internal``)."""
        if plan.upstream is not None and internal:
            self._ensure_sink_topic(plan.upstream, text)
        partitions = plan.with_props.get("PARTITIONS")
        if partitions is None:
            with self._client() as client:
                partitions = len(client.partitions_for(plan.source.topic))
        self._ensure_topic(plan.sink.topic, partitions, plan.with_props.get("REPLICAS"), text)

    def _delete_internal_topics(self, query_id: str) -> None:
        """A terminated (or closed push) query's internal topic goes with it, as ksqlDB deletes
        a query's internal topics when it is terminated; a missing topic is not an error."""
        topic = self.internal_topics.pop(query_id, None)
        self.plans.pop(f"{query_id}_JOIN", None)
        if topic is None:
            return
        try:
            with Admin(self.config.bootstrap_servers, security=self.config.security) as admin:
                errors = admin.delete_topics([topic])
        except Exception as exc:                          # the query is terminated either way
            log.warning("deleting the internal topic %s of %s: %s", topic, query_id, exc)
            return
        error = errors.get(topic)
        if error is not None and getattr(error, "code", None) != ErrorCode.UNKNOWN_TOPIC_OR_PARTITION:
            log.warning("deleting the internal topic %s of %s: %s", topic, query_id, error)

    def _compile(self, plan: "QueryPlan", batch: bool = False) -> tuple[Any, str]:
        """The plan as a Spark streaming DataFrame over a temporary view of its decoded source,
        and the Spark SQL text it runs (what EXPLAIN shows). A stream-table join's DataFrame is
        the stream's rows with the join still to do per micro-batch (``TableJoin``). With
        ``batch``, a batch DataFrame of the source's records so far (a stream pull query: no
        join, window or aggregate, which ``_check_pull`` refused)."""
        spark = self.spark
        src, q = plan.source, plan.select
        view = _view_name(plan)
        frame = self._source_frame(src, plan.offset_reset, self.spark if batch else None)
        if q.window is not None:
            grace = q.window.grace_ms if q.window.grace_ms is not None else DEFAULT_GRACE_MS
            frame = frame.withWatermark("ROWTIME", f"{grace} milliseconds")
        if plan.joins and plan.source.kind == "TABLE":
            return self._compile_table_table_join(plan, view)
        if plan.aggregate and plan.source.kind == "TABLE":
            return self._compile_table_aggregate(plan, view)
        kinds = {d.kind for _, d, _ in plan.joins}
        if kinds == {"STREAM", "TABLE"}:                  # stream-stream joins, then the tables per batch
            streams, _ = self._compile_join(plan, frame, view, structs=True)
            return self._compile_table_join(plan, streams, view, streamed=True)
        if kinds == {"TABLE"}:
            return self._compile_table_join(plan, frame, view)
        if plan.joins:
            return self._compile_join(plan, frame, view)
        frame.createOrReplaceTempView(view)
        known = plan.scope
        assert isinstance(known, set)                     # one source: a join's Scope went above
        text = plan.source.statement
        w = q.window if plan.aggregate else None
        wexpr = None if w is None else (
            f"session_window(`ROWTIME`, '{w.size_ms} milliseconds')" if w.kind == "SESSION" else
            f"window(`ROWTIME`, '{w.size_ms} milliseconds'" + (f", '{w.advance_ms} milliseconds')" if w.advance_ms
                                                             else ")"))
        bounds = wexpr if w is None or wexpr is None else window_bounds(wexpr, w)
        select = [f"{to_spark(e, known, text, bounds)} AS {quote(n)}" for n, e in plan.items]
        select.append(_event_time(plan))
        if w is None and plan.sink.window is not None and src.window is not None:   # kept: the output's keys
            select += ["`WINDOWSTART` AS `__windowstart`", "`WINDOWEND` AS `__windowend`"]
        keys_sql = [to_spark(e, known, text) for e in plan.key_exprs]
        for name, e, sql in zip(plan.key_names, plan.key_exprs, keys_sql):
            if name not in [n for n, _ in plan.items]:
                select.append(f"{sql} AS {quote(name)}")
        group = ""
        if plan.aggregate:
            parts = list(keys_sql)
            if wexpr is not None:
                select.append(f"{bounds} AS `__window`")
                parts.append(wexpr)
            group = " GROUP BY " + ", ".join(parts)
            if q.having is not None:
                group += " HAVING " + to_spark(q.having, known | {n for n, _ in plan.items}, text, bounds)
        where = f" WHERE {to_spark(q.where, known, text)}" if q.where is not None else ""
        sql = f"SELECT {', '.join(select)} FROM {view}{where}{group}"
        return spark.sql(sql), sql

    def _compile_table_join(self, plan: "QueryPlan", stream: Any, view: str,
                            streamed: bool = False) -> tuple[Any, str]:
        """A stream joined with one or more tables: each micro-batch of the stream is joined with
        each table as it is at that moment, the latest record per key of the table's topic
        (read_committed; a tombstone deletes), as ksqlDB joins a stream record with the table's
        current row; the joins apply in order, each ON naming the columns before it. The tables'
        topics are read again for each micro-batch: meant for dimension tables. With
        ``streamed``, ``stream`` is a stream-stream join's output, one struct column per joined
        stream named by its alias (``S``.``ID`` then reads the struct's field), and the query's
        table joins apply to each of its micro-batches."""
        q, scope, text = plan.select, plan.scope, plan.sink.statement
        left_alias = q.alias or plan.source.name
        select = [f"{to_spark(e, scope, text)} AS {quote(n)}" for n, e in plan.items] + [_event_time(plan)]
        where = f" WHERE {to_spark(q.where, scope, text)}" if q.where is not None else ""
        from_sql = stream_from = f"{view}_stream AS {quote('__streams' if streamed else left_alias)}"
        tables = [(j, d, a) for j, d, a in plan.joins if d.kind == "TABLE"]
        lookups: list[str | None] = []                    # the values each table's key is looked up by
        for index, (join, table, alias) in enumerate(tables):
            assert isinstance(join.on, ast.Binary)
            _, other = _join_sides(join.on, alias, table, [(left_alias, plan.source)] + [
                (a, d) for _, d, a in plan.joins if a != alias], text)
            from_sql += (f" {'LEFT OUTER JOIN' if join.kind == 'LEFT' else 'INNER JOIN'} {view}_table{index or ''} AS "
                         f"{quote(alias)} ON {to_spark(join.on, scope, text)}"
                         f"{join_rules.window_match(str(other.source), alias, table.window)}")
            earlier = next((i for i, (_, _, a) in enumerate(tables[:index]) if a == other.source), None)
            rows_from = stream_from if earlier is None else f"{view}_table{earlier or ''} AS {quote(str(other.source))}"
            lookups.append(f"SELECT DISTINCT {to_spark(other, scope, text)} FROM {rows_from}"
                           if len(table.key_columns) == 1 else None)
        sql = f"SELECT {', '.join(select)} FROM {from_sql}{where}"
        # each table's latest rows, kept across micro-batches: a batch reads the table's new records
        # only, and hands Spark the rows its stream records look up (a resumed query reads it all once)
        states = [TableState([c.name for c in table.key_columns], table.window is not None) for _, table, _ in tables]
        self.table_states[plan.query_id] = states
        cached: list[Any] = []                            # the batch, kept until its join is written

        def release() -> None:
            while cached:
                cached.pop().unpersist()

        def per_batch(batch: Any) -> Any:
            session = batch.sparkSession
            release()
            batch.persist()                               # read once by the look-ups and by the join
            cached.append(batch)
            batch.createOrReplaceTempView(f"{view}_stream")
            for index, (_, table, _) in enumerate(tables):
                state = states[index]
                schema = self._read_changes(session, table, state)
                lookup = lookups[index]
                if lookup is None:
                    rows = list(state.rows.values())
                elif table.window is None:                 # only the rows this batch's records can join
                    wanted = {group_key(r) for r in session.sql(lookup).collect()}
                    rows = [state.rows[k] for k in wanted if k in state.rows]
                else:                                      # a windowed table: every window of those keys
                    values = {group_key(r)[0] for r in session.sql(lookup).collect()}
                    rows = [r for k, r in state.rows.items() if k[0] in values]
                _rows_frame(session, rows, schema).createOrReplaceTempView(f"{view}_table{index or ''}")
            return session.sql(sql)
        return TableJoin(stream, per_batch, release), sql

    def _compile_table_aggregate(self, plan: "QueryPlan", view: str) -> tuple["TableAggregate", str]:
        """An aggregate over a table (a table source, or a table-table join's output topic), as
        ksqlDB's KGroupedTable aggregate: a row replaced or deleted leaves its old group. The
        query streams the table's records from the start (the first batch writes the table's
        aggregate as it is); ``_table_aggregate_batch`` keeps the table's latest rows and their
        groups, and aggregates again only the groups a batch changes (the rows of ``{view}_table``,
        WHERE first), with ksqlDB's zero start for SUM and AVG, plus HAVING as ``__having``."""
        q, known, text = plan.select, plan.scope, plan.sink.statement
        assert isinstance(known, set)
        changes = self._source_frame(plan.source, "earliest", tombstones=True)
        having = [] if q.having is None else [
            f"{to_spark(join_rules.undone_aggregates(q.having), known, text)} AS `__having`"]

        def aggregate_sql(items: list[tuple[str, ast.Expr]], where: str, group: str) -> str:
            select = [f"{to_spark(join_rules.undone_aggregates(e), known, text)} AS {quote(n)}" for n, e in items]
            return f"SELECT {', '.join(select + [_event_time(plan)] + having)} FROM {view}_table{where}{group}"
        where = f" WHERE {to_spark(q.where, known, text)}" if q.where is not None else ""
        # the items, and a GROUP BY expression that is not one of them under its key name
        selected = list(plan.items) + [(n, e) for n, e in zip(plan.key_names, plan.key_exprs)
                                       if n not in {m for m, _ in plan.items}]
        sql = aggregate_sql(selected, where, " GROUP BY " + ", ".join(to_spark(e, known, text)
                                                                      for e in plan.key_exprs))

        def emptied(key: tuple[Any, ...]) -> str:
            """The row of a group with no row left: the items over no row, the key as literals."""
            values = list(zip(plan.key_exprs, key))
            return aggregate_sql([(n, join_rules.substitute(e, values)) for n, e in selected], " WHERE false", "")

        groups = (f"SELECT {', '.join(to_spark(e, known, text) for e in plan.key_exprs)} FROM {view}_changed"
                  if plan.key_exprs else f"SELECT 1 FROM {view}_changed")
        return TableAggregate(changes, view, groups, sql, emptied), sql

    def _read_changes(self, session: Any, table: DataSource, state: TableState,
                      until: str | None = None) -> Any:
        """The table topic's records that ``state`` has not applied yet (read_committed, up to now
        or to the offsets JSON ``until``) applied to it; returns their schema (the rows' columns)."""
        if until is not None:                             # the partitions the offsets name
            partitions = [int(p) for p in json.loads(until).get(table.topic, {})]
        else:
            with self._client() as client:
                partitions = client.partitions_for(table.topic)
        frame = self._source_frame(table, "earliest", session,
                                   offsets=(state.starting_offsets(table.topic, partitions), until or "latest"))
        state.apply(r.asDict() for r in frame.collect())
        return frame.schema

    def _compile_table_table_join(self, plan: "QueryPlan", view: str) -> tuple["TableTableJoin", str]:
        """Tables joined with tables, as Kafka Streams' KTable-KTable joins: the query streams
        every joined table's records (each side's row as a struct column ``__row<i>``, with its
        changed key); each side's latest row per key is kept across micro-batches
        (``TableState``), a batch applying only its own records, and Spark is handed only the rows
        the batch's changed keys touch: on a primary-key join, each side's rows of those keys; on
        a foreign-key join, the changed left rows and every left row pointing at a changed right
        key (``GroupIndex``: left key -> foreign key), with the right rows they name. The joined
        rows are those a changed key touches; the engine compares them with the output table so
        far: a key that no longer joins (a side deleted, an INNER partner gone, a WHERE no longer
        true) gets a tombstone. A query resumed from its checkpoint first reads each side up to
        where its next batch starts; a new query starting at ``latest`` reads each side up to the
        offsets its stream starts at (the tables as they are), so its joins see the whole tables."""
        q, scope, text = plan.select, plan.scope, plan.sink.statement
        tables = [(q.alias or plan.source.name, plan.source)] + [(a, d) for _, d, a in plan.joins]
        kinds = {"INNER": "INNER JOIN", "LEFT": "LEFT OUTER JOIN", "RIGHT": "RIGHT OUTER JOIN",
                 "FULL": "FULL OUTER JOIN"}
        checkpoint = (None if plan.query_id.startswith("transient_")
                      else Path(self.config.state_dir) / self.config.service_id / plan.query_id)
        starts = [self._join_start(table, plan.offset_reset, checkpoint, index)
                  for index, (_, table) in enumerate(tables)]
        changes = None
        for index, (_, table) in enumerate(tables):
            frame = self._source_frame(table, starts[index] or plan.offset_reset, tombstones=True)
            side = frame.selectExpr(
                f"{index} AS `__side`", join_rules.keyed_in_window(quote(table.key_columns[0].name), None, table.window)
                + " AS `__key`", "`ROWTIME`", f"struct(*) AS `__row{index}`")
            changes = side if changes is None else changes.unionByName(side, allowMissingColumns=True)

        def changed(index: int) -> str:
            return f"(SELECT `__key` FROM {view}_changes WHERE `__side` = {index})"
        # (expression, side): a joined row is touched by a change of that side's key
        touches = [(ast.Column(tables[0][1].key_columns[0].name, tables[0][0]), 0)]
        foreign: ast.Column | None = None
        windows = dict(tables)                            # alias -> table (a windowed one keys by its window too)
        same_window: list[str] = []
        for index, (join, table, alias) in enumerate(plan.joins, start=1):
            assert isinstance(join.on, ast.Binary)
            mine, other = _join_sides(join.on, alias, table, tables[:index], text)
            touches += [(mine, index), (other, index)]
            same_window.append(join_rules.window_match(str(other.source), alias, table.window))
            if index == 1 and other.name != tables[0][1].key_columns[0].name:
                foreign = other
        touched = " OR ".join(
            f"{join_rules.keyed_in_window(to_spark(e, scope, text), e.source, windows[str(e.source)].window)} IN "
            f"{changed(i)}" for e, i in touches)
        where = f"({to_spark(q.where, scope, text)}) AND " if q.where is not None else ""
        from_sql = f"{view}_t0 AS {quote(tables[0][0])}"
        for index, (join, _, alias) in enumerate(plan.joins, start=1):
            from_sql += (f" {kinds[join.kind]} {view}_t{index} AS {quote(alias)} ON {to_spark(join.on, scope, text)}"
                         f"{same_window[index - 1]}")
        select = [f"{to_spark(e, scope, text)} AS {quote(n)}" for n, e in plan.items] + [_event_time(plan)]
        sql = f"SELECT {', '.join(select)} FROM {from_sql} WHERE {where}({touched})"
        left_key = f"{quote(tables[0][0])}.{quote(tables[0][1].key_columns[0].name)}"
        candidates = f"SELECT `__key` FROM {view}_changes" if foreign is None else (
            f"SELECT `__key` FROM {view}_changes WHERE `__side` = 0 UNION SELECT CAST({left_key} AS STRING) FROM "
            f"{view}_t0 AS {quote(tables[0][0])} WHERE CAST({to_spark(foreign, scope, text)} AS STRING) IN "
            f"{changed(1)}")
        states = [TableState([c.name for c in table.key_columns], table.window is not None) for _, table in tables]
        self.table_states[plan.query_id] = states
        pointing = GroupIndex()                           # a foreign-key join: left key -> its foreign key
        fk_name = None if foreign is None else foreign.name
        left_name = tables[0][1].key_columns[0].name
        started: list[bool] = []

        def point(changed_rows: dict[Any, Any]) -> None:
            if fk_name is not None:
                for k, (_, after) in changed_rows.items():
                    fk = None if after is None else after.get(fk_name)
                    pointing.move(k, None if fk is None else group_key([fk]))

        def resume(session: Any, batch_id: int) -> None:
            """Each side as the batch before this one left it (a resumed query), or as it was where
            a new query's stream starts (``latest``): read once, before the first batch applies."""
            offsets = _checkpointed_sources(checkpoint, batch_id - 1) if checkpoint is not None and batch_id else None
            for index, (_, table) in enumerate(tables):
                until = starts[index] if offsets is None else _topic_offsets(offsets, table.topic)
                if until is not None:
                    self._read_changes(session, table, states[index], until)
            point({k: (None, r) for k, r in states[0].rows.items()})
            for state in states:
                state.reads.clear()

        def prepare(batch: Any, batch_id: int = 0) -> tuple[list[Any], str, str]:
            """The batch's records applied to each side's state, the rows its changed keys touch
            as the views ``<view>_t<i>``, and the join's SQL and the candidates' (keys whose
            output row may change) with each side's changed keys written in as literals."""
            session = batch.sparkSession
            rows = batch.collect()
            schemas = [batch.schema[f"__row{index}"].dataType for index in range(len(tables))]
            if not started:
                started.append(True)
                resume(session, batch_id)
            keys: list[set[Any]] = []
            for index, state in enumerate(states):
                records = [r[f"__row{index}"].asDict() for r in rows if r["__side"] == index]
                applied = state.apply(records)
                if index == 0:
                    point(applied)
                keys.append({state.key_of(r) for r in records})
            keyed = {r["__key"] for r in rows if r["__key"] is not None}
            if fk_name is None:                           # one key: each side's rows of every changed key
                wanted = set().union(*keys)
                handed = [[s.rows[k] for k in wanted if k in s.rows] for s in states]
                candidates_now = keyed
            else:                                         # the changed left rows and those pointing at a changed right key
                pointed_keys = set(pointing.keys_in(keys[1]))
                pointed = [states[0].rows[k] for k in pointed_keys if k in states[0].rows]
                left_rows = [states[0].rows[k] for k in keys[0] | pointed_keys if k in states[0].rows]
                named = {group_key([r.get(fk_name)]) for r in left_rows}
                handed = [left_rows, [states[1].rows[k] for k in named if k in states[1].rows]]
                candidates_now = {r["__key"] for r in rows if r["__side"] == 0 and r["__key"] is not None} | {
                    str(r.get(left_name)) for r in pointed}
            for index, view_rows in enumerate(handed):
                _rows_frame(session, view_rows, schemas[index]).createOrReplaceTempView(f"{view}_t{index}")
            join_sql = sql
            for index in range(len(tables)):
                listed_keys = sorted({r["__key"] for r in rows if r["__side"] == index and r["__key"] is not None})
                listed = "(" + ", ".join(literal(k) for k in listed_keys) + ")" if listed_keys else "(NULL)"
                join_sql = join_sql.replace(changed(index), listed)
            # the keys whose output row may change, worked out from the state: written in as literals
            candidates_sql = ("SELECT explode(array(" + ", ".join(literal(k) for k in sorted(candidates_now))
                              + ")) AS `__key`")
            return rows, join_sql, candidates_sql

        def per_batch(batch: Any) -> Any:
            _, join_sql, _ = prepare(batch)
            return batch.sparkSession.sql(join_sql)
        return TableTableJoin(changes, per_batch, prepare, sql, candidates), sql

    def _join_start(self, table: DataSource, offset_reset: str, checkpoint: Path | None, index: int) -> str | None:
        """Where a table-table join's stream of ``table`` starts, as offsets JSON, when it starts
        at ``latest``: the topic's last stable offsets now (kept in the checkpoint's directory, so a
        first batch Spark runs again starts where it did), which its state first reads up to."""
        if offset_reset != "latest":
            return None
        kept = None if checkpoint is None else checkpoint / f"table-join-start-{index}.json"
        if kept is not None and kept.exists():
            return kept.read_text()
        with self._client() as client:
            ends = client.list_offsets({TopicPartition(table.topic, p): -1
                                        for p in client.partitions_for(table.topic)}, isolation_level=1)
        text = json.dumps({table.topic: {str(tp.partition): offset for tp, (offset, _) in sorted(ends.items())}})
        if kept is not None:
            kept.parent.mkdir(parents=True, exist_ok=True)
            kept.write_text(text)
        return text

    def _compile_join(self, plan: "QueryPlan", left: Any, view: str, structs: bool = False) -> tuple[Any, str]:
        """A stream-stream join as Spark's: each side a view with a watermark of its grace period
        (ksqlDB's default without GRACE PERIOD: 24 hours), the ON equality plus the WITHIN bounds
        as a time-range condition on ROWTIME (right.ROWTIME BETWEEN left.ROWTIME - before AND
        left.ROWTIME + after), so Spark drops old state and emits an outer join's unmatched rows
        once the grace period has passed. With ``structs`` (a query that joins tables too) only
        the stream joins run here and each stream's row is one struct column named by its alias,
        for ``_compile_table_join`` to join the tables to and project (WHERE applies there)."""
        q, scope, text = plan.select, plan.scope, plan.sink.statement
        stream_joins = [(j, d, a) for j, d, a in plan.joins if d.kind == "STREAM"]
        graces = [j.within.grace_ms if j.within and j.within.grace_ms is not None else DEFAULT_GRACE_MS
                  for j, _, _ in stream_joins]
        left_alias = q.alias or plan.source.name
        left.withWatermark("ROWTIME", f"{max(graces)} milliseconds").createOrReplaceTempView(f"{view}_0")
        from_sql = f"{view}_0 AS {quote(left_alias)}"
        kinds = {"INNER": "INNER JOIN", "LEFT": "LEFT OUTER JOIN", "RIGHT": "RIGHT OUTER JOIN",
                 "FULL": "FULL OUTER JOIN"}
        joined: list[tuple[str, DataSource]] = [(left_alias, plan.source)]
        for index, ((join, right, alias), grace) in enumerate(zip(stream_joins, graces), start=1):
            assert join.within is not None and isinstance(join.on, ast.Binary)
            _, other = _join_sides(join.on, alias, right, joined, text)
            joined.append((alias, right))
            (self._source_frame(right, plan.offset_reset).withWatermark("ROWTIME", f"{grace} milliseconds")
             .createOrReplaceTempView(f"{view}_{index}"))
            lt, rt = f"{quote(left_alias)}.`ROWTIME`", f"{quote(alias)}.`ROWTIME`"
            from_sql += (f" {kinds[join.kind]} {view}_{index} AS {quote(alias)} ON {to_spark(join.on, scope, text)}"
                         f"{join_rules.window_match(str(other.source), alias, right.window)}"
                         f" AND {rt} >= {lt} - INTERVAL {join.within.before_ms} MILLISECONDS"
                         f" AND {rt} <= {lt} + INTERVAL {join.within.after_ms} MILLISECONDS")
        select = [f"{to_spark(e, scope, text)} AS {quote(n)}" for n, e in plan.items] + [_event_time(plan)]
        if plan.sink.window is not None and plan.source.window is not None:      # the output keys' window
            select += [f"{quote(left_alias)}.`WINDOWSTART` AS `__windowstart`",
                       f"{quote(left_alias)}.`WINDOWEND` AS `__windowend`"]
        where = f" WHERE {to_spark(q.where, scope, text)}" if q.where is not None else ""
        if structs:
            select = [f"struct({quote(a)}.*) AS {quote(a)}" for a in [left_alias] + [a for _, _, a in stream_joins]]
            where = ""
        sql = f"SELECT {', '.join(select)} FROM {from_sql}{where}"
        return self.spark.sql(sql), sql

    def _run(self, plan: "QueryPlan") -> None:
        upstream = plan.upstream
        if upstream is not None and not getattr(self.running.get(upstream.query_id), "isActive", False):
            self._run(upstream)                       # the join feeding the aggregate (not already running)
        q = plan.select
        src = plan.source
        each_source_batch: Callable[[Any, int], None] | None = None
        if plan.materialize_only:
            result, each_source_batch, sql = self._source_table_writer(plan)
        else:
            result, sql = self._compile(plan)
        self.plans[plan.query_id] = (plan, sql)
        sink_options = {"kafka.bootstrap.servers": self.config.bootstrap_servers, "topic": plan.sink.topic,
                        "deliveryGuarantee": "exactly_once", **self._security_options()}
        if plan.sink.value_format == "AVRO":
            sink_options.update({"schemaRegistryUrl": self.config.schema_registry_url or "",
                                 "valueAvroSubject": f"{plan.sink.topic}-value"})
            if plan.sink.value_schema_id is not None:     # written with the schema VALUE_SCHEMA_ID names
                sink_options["valueAvroVersion"] = self._version_of_id(plan.sink, False)
        # Spark aggregates session windows in append mode only: a session is written once, when
        # its grace period has passed (as with EMIT FINAL)
        update = plan.aggregate and q.emit != "FINAL" and (q.window is None or q.window.kind != "SESSION")
        prefix = f"ksql-{self.config.service_id}-{plan.query_id}"
        key_sql = self._key_sql(plan)

        def stream(frame: Any) -> Any:
            return (frame.writeStream.queryName(plan.query_id)
                    .option("checkpointLocation", str(Path(self.config.state_dir) / self.config.service_id
                                                      / plan.query_id))
                    .outputMode("update" if update else "append")
                    .trigger(processingTime=f"{self.config.streams_property('commit.interval.ms', '2000')} "
                                            "milliseconds"))

        def write(frame: Any, batch_id: int, tombstones: bool = False) -> None:
            """One micro-batch by a batch write, exactly once through the sink's batchId option
            (Python data sources take appends only, so update mode and per-batch joins go here);
            with ``tombstones``, a row whose ``__tombstone`` is true is written with a null value."""
            w = frame.selectExpr(key_sql, *self._value_sql(plan, frame, tombstones), OUTPUT_TIMESTAMP).write \
                .format("kafkalite").mode("append")
            for k, v in {**sink_options, "transactionalIdPrefix": prefix, "batchId": str(batch_id)}.items():
                w = w.option(k, v)
            w.save()
        if each_source_batch is not None:
            writer = stream(result).foreachBatch(each_source_batch)
        elif isinstance(result, TableTableJoin):
            writer = stream(result.stream).foreachBatch(self._table_join_batch(plan, result, write))
        elif isinstance(result, TableAggregate):
            writer = stream(result.changes).foreachBatch(self._table_aggregate_batch(
                plan, result, self._table_aggregate_store(plan, True), write,
                Path(self.config.state_dir) / self.config.service_id / plan.query_id))
        elif isinstance(result, TableJoin):
            join = result

            def join_batch(batch: Any, batch_id: int) -> None:
                try:
                    write(join.per_batch(batch), batch_id)
                finally:
                    join.release()
            writer = stream(join.stream).foreachBatch(join_batch)
        elif plan.aggregate:
            # the batch's rows update the table's state store that pull queries read before they
            # are written, as ksqlDB's state stores run ahead of the output topic's commit: a reader
            # that has seen a row in the topic finds it in a pull query (a batch Spark runs again
            # recomputes the same rows, so an update whose write failed is made again). EMIT FINAL
            # and session windows run in append mode: their rows reach the store when the window
            # closes (ksqlDB's pull queries also see a window still open: see docs/sql.md)
            store = self._store_for(plan, result)
            windowed = q.window is not None
            if (Path(self.config.state_dir) / self.config.service_id / plan.query_id).exists():
                self._restore_store(plan, store)          # a resumed query: the table so far is in its topic

            def write_batch(batch: Any, batch_id: int) -> None:
                batch.persist()
                try:
                    store.update([_store_row(r.asDict(), windowed) for r in batch.collect()])
                    write(batch, batch_id)
                finally:
                    batch.unpersist()
            writer = stream(result).foreachBatch(write_batch)
        else:
            writer = stream(result.selectExpr(key_sql, *self._value_sql(plan, result), OUTPUT_TIMESTAMP)) \
                .format("kafkalite")
            for k, v in sink_options.items():
                writer = writer.option(k, v)
        running = self.running[plan.query_id] = self._start_stream(writer, plan)
        await_sources(running)                            # one query's source process starting at a time
        log.info("query %s started: %s -> %s", plan.query_id, src.topic, plan.sink.topic)
        threading.Thread(target=self._supervise, args=(plan, running), name=f"supervise-{plan.query_id}",
                         daemon=True).start()

    def _start_stream(self, writer: Any, plan: "QueryPlan") -> Any:
        """``writer.start()``; a windowed aggregate over one stream started with ALLOW_MULTIPLE
        false, so that it drops late records by ksqlDB's rule applied per micro-batch.

        ksqlDB (Kafka Streams' KStreamWindowAggregate) drops a record when its window's end +
        grace <= stream time, the largest timestamp seen so far. Spark's watermark is that
        stream time minus the grace period as of the previous micro-batches; but with
        ALLOW_MULTIPLE true (its default, so that chained stateful operators do not drop each
        other's output) the late filter uses the watermark of the micro-batch before the current
        one: a record beyond the grace period arriving in the micro-batch right after the one
        that moved stream time on (about one commit interval behind it) was still counted. A
        windowed aggregate over one stream is a single stateful operator, the case the setting
        is for; queries with several (stream-stream joins) keep the default, which they need.
        Spark reads the setting from the session when the query starts (the query runs on a
        copy of the session's settings), so it is set around ``start`` under a lock that every
        query start takes. The session is made the starting thread's active one first
        (:meth:`_activate_session`)."""
        single = plan.aggregate and plan.select.window is not None and not plan.joins
        with _START_LOCK:
            self._activate_session()
            if not single:
                return writer.start()
            conf = self.spark.conf
            before = conf.get(ALLOW_MULTIPLE)
            conf.set(ALLOW_MULTIPLE, "false")
            try:
                return writer.start()
            finally:
                conf.set(ALLOW_MULTIPLE, before)

    def _activate_session(self) -> None:
        """The session made the calling thread's active one in the JVM: Spark looks a Python data
        source such as the ``kafkalite`` sink up in that thread-local session only
        (``DataSource.lookupDataSource``: ``SparkSession.getActiveSession``), so a query restarted
        from its supervising thread, which had none, failed every attempt with DATA_SOURCE_NOT_FOUND."""
        self.spark._jvm.SparkSession.setActiveSession(self.spark._jsparkSession)

    def _table_join_batch(self, plan: "QueryPlan", join: TableTableJoin,
                          write: Callable[..., None]) -> Callable[[Any, int], None]:
        """A table-table join's micro-batch: the joined rows the batch's changed keys touch are
        written and put in the table's state store (pull queries read it); a key the batch may
        change that has a row in the store but no joined row now is deleted: a tombstone, as
        Kafka Streams forwards a KTable-KTable join's deletions. A resumed query first rebuilds
        the store from its output topic, so it knows which keys have rows."""
        types = self._plan_types(plan)
        names = [n for n, _ in plan.items]
        store = StateStore(list(plan.key_names), False, names, [types.get(n, "STRING") for n in names])
        self.stores[plan.sink.name] = store
        # a checkpoint Spark has run (the directory alone may hold only the join's start offsets)
        if (Path(self.config.state_dir) / self.config.service_id / plan.query_id / "offsets").exists():
            self._restore_store(plan, store)
        key = plan.key_names[0] if plan.key_names else None

        def each_batch(batch: Any, batch_id: int) -> None:
            session = batch.sparkSession
            started = time.monotonic()
            changes, join_sql, candidates_sql = join.prepare(batch, batch_id)
            result = session.sql(join_sql)
            rows = [r.asDict() for r in result.collect()]
            candidates = {r[0] for r in session.sql(candidates_sql).collect()}
            produced = {str(r.get(key)) for r in rows}
            # a tombstone's time is its key's latest change (a foreign key's: the batch's latest)
            latest = max((c["ROWTIME"] for c in changes), default=None)
            times: dict[str, Any] = {}
            for c in changes:
                times[c["__key"]] = max(c["ROWTIME"], times.get(c["__key"], c["ROWTIME"]))
            gone = [k for k in store.keys() if str(k[0]) in candidates and str(k[0]) not in produced]
            fields = [f.name for f in result.schema.fields]
            out = [tuple(r.get(f) for f in fields) + (False,) for r in rows]
            out += [tuple(k[0] if f == key else times.get(str(k[0]), latest) if f == EVENT_TIME else None
                          for f in fields) + (True,) for k in gone]
            from pyspark.sql.types import BooleanType, StructField, StructType
            schema = StructType(result.schema.fields + [StructField("__tombstone", BooleanType())])
            frame = session.createDataFrame(out, schema)
            # the store runs ahead of the topic, as the aggregates' does: a row a reader has seen in
            # the topic is in the store (a batch Spark runs again makes the same changes)
            store.delete(gone)
            store.update([_store_row(r, False) for r in rows])
            write(frame, batch_id, True)
            log.debug("%s batch %d: %d changed keys, %d rows, %d tombstones in %.1f s", plan.query_id, batch_id,
                      len(changes), len(rows), len(gone), time.monotonic() - started)
        return each_batch

    def _table_aggregate_store(self, plan: "QueryPlan", persistent: bool) -> StateStore:
        """A table aggregate's output table so far: a persistent query's is its table's state
        store (pull queries read it; a resumed query rebuilds it from its topic first), a push
        query's its own."""
        types = self._plan_types(plan)
        names = [n for n, _ in plan.items]
        store = StateStore(list(plan.key_names), False, names, [types.get(n, "BIGINT") for n in names])
        if persistent:
            self.stores[plan.sink.name] = store
            if (Path(self.config.state_dir) / self.config.service_id / plan.query_id).exists():
                self._restore_store(plan, store)
        return store

    def _table_aggregate_batch(self, plan: "QueryPlan", agg: "TableAggregate", store: StateStore,
                               write: Callable[..., None], checkpoint: Path | None = None
                               ) -> Callable[[Any, int], None]:
        """A table aggregate's micro-batch, as ksqlDB's KGroupedTable aggregate keeps its state:
        the table's latest rows and the group of each (``TableState``, ``GroupIndex``) are kept
        across micro-batches and updated with the batch's records; the groups a changed row leaves
        or joins are aggregated again over their rows only, and compared with the output table
        (``store``): a group whose row changed is written; a group whose rows are all gone keeps
        its undone row (COUNT 0, SUM 0, ...) as Kafka Streams' table aggregate does; a row HAVING
        no longer accepts is deleted (a tombstone), as ksqlDB filters a table. The store runs
        ahead of the topic, as the other aggregates' do. A query resumed from ``checkpoint`` first
        reads the table up to where its next batch starts (the end of the batch before it in
        Spark's offset log), so each record is applied once."""
        keys = list(plan.key_names)
        names = [n for n, _ in plan.items] + [k for k in keys if k not in {n for n, _ in plan.items}]
        table = plan.source
        state = TableState([c.name for c in table.key_columns], table.window is not None)
        index = GroupIndex()
        self.table_states[plan.query_id] = [state]
        started: list[bool] = []

        def regroup(session: Any, schema: Any, changes: dict[Any, Any]) -> set[Any]:
            """The changed rows moved to their groups now; the groups they left or joined."""
            present = [(k, after) for k, (_, after) in changes.items() if after is not None]
            _rows_frame(session, [r for _, r in present], schema).createOrReplaceTempView(f"{agg.view}_changed")
            groups = [group_key(r) for r in session.sql(agg.groups).collect()] if present else []
            now = dict(zip([k for k, _ in present], groups))
            affected = set(groups)
            for key in changes:
                old = index.move(key, now.get(key))
                if old is not None:
                    affected.add(old)
            return affected

        def each_batch(batch: Any, batch_id: int) -> None:
            session = batch.sparkSession
            if not started:
                started.append(True)
                until = _checkpointed_offsets(checkpoint, batch_id - 1) if checkpoint and batch_id else None
                if until is not None:                     # resumed: the table as the last committed batch left it
                    restored = TableState(state.key_names, state.windowed)
                    schema = self._read_changes(session, table, restored, until)
                    regroup(session, schema, {k: (None, r) for k, r in restored.rows.items()})
                    state.rows, state.positions = restored.rows, restored.positions
            records = [r.asDict() for r in batch.collect()]
            changes = state.apply(records)
            if not changes:
                return
            times = [r["ROWTIME"] for r in records]
            affected = regroup(session, batch.schema, changes)
            _rows_frame(session, [state.rows[k] for k in index.keys_in(affected)], batch.schema) \
                .createOrReplaceTempView(f"{agg.view}_table")
            result = session.sql(agg.sql)
            fields = [f.name for f in result.schema.fields]
            rows = [r.asDict() for r in result.collect()]
            now = {tuple(r.get(k) for k in keys): r for r in rows}
            for key in affected:
                if key not in now and store.get(key) is not None:     # every row of the group is gone
                    for r in session.sql(agg.emptied(key)).collect():
                        now[key] = {**r.asDict(), EVENT_TIME: max(times)}
            out: list[tuple[Any, ...]] = []
            for key, row in now.items():
                accepted = row.get("__having", True) is not False
                old = store.get(key)
                if not accepted:
                    if old is not None:
                        out.append(tuple(row.get(f) for f in fields) + (True,))
                        store.delete([key])
                    continue
                if old is None or any(old.get(n) != row.get(n) for n in names):
                    out.append(tuple(row.get(f) for f in fields) + (False,))
                    store.update([_store_row({n: row.get(n) for n in names}, False)])
            log.debug("%s batch %d: %d records, %d groups aggregated, %d rows written", plan.query_id, batch_id,
                      len(records), len(affected), len(out))
            if out:
                from pyspark.sql.types import BooleanType, StructField, StructType
                schema = StructType(result.schema.fields + [StructField("__tombstone", BooleanType())])
                write(session.createDataFrame(out, schema), batch_id, True)
        return each_batch

    # -- failed persistent queries: restart with back-off (ksqlDB's QueryMetadataImpl.RetryEvent) --
    def _supervise(self, plan: "QueryPlan", running: Any) -> None:
        """Waits for the Spark query to end; if it failed (e.g. a Python worker that did not
        connect back under load) while the query is still live, it is ERROR while it waits out a
        back-off (``ksql.query.retry.backoff.initial.ms``, doubled at each failure of the same query
        up to ``ksql.query.retry.backoff.max.ms``, as ksqlDB's retry event does), then restarted
        from its checkpoint, so it resumes where its last committed micro-batch ended."""
        try:
            running.awaitTermination()
            return                                        # stopped on purpose: TERMINATE, DROP, shutdown
        except Exception as exc:
            error = _first_line(exc)
        query_id = plan.query_id
        owner = plan.owner or query_id                    # a join feeding an aggregate lives as long as it
        while True:
            with self._lock:
                q = self.metastore.queries.get(owner)
                if q is None or q.state == "TERMINATED" or self._stopping.is_set() \
                        or self.running.get(query_id) is not running:
                    return
                q.state, q.error = "ERROR", error
                attempt = self.restarts[query_id] = self.restarts.get(query_id, 0) + 1
            wait_ms = min(self.config.retry_backoff_initial_ms << min(attempt - 1, 40),
                          self.config.retry_backoff_max_ms)
            log.error("query %s failed: %s; restarting it from its checkpoint in %d ms (attempt #%d)",
                      query_id, error, wait_ms, attempt)
            if self._backoff(wait_ms):
                return
            with self._lock:
                q = self.metastore.queries.get(owner)
                if q is None or q.state == "TERMINATED" or self._stopping.is_set() \
                        or self.running.get(query_id) is not running:
                    return                                # terminated or dropped while waiting
                try:
                    self._run(plan)                       # same query id: same checkpoint location
                except Exception as exc:                  # Spark could not start it: wait longer, try again
                    error = _first_line(exc)
                    continue
                q.state = "RUNNING"
            log.info("query %s restarted from its checkpoint (attempt #%d)", query_id, attempt)
            return

    def _backoff(self, wait_ms: int) -> bool:
        """Waits out a restart back-off; True if the server stops meanwhile."""
        return self._stopping.wait(wait_ms / 1000)

    def _store_for(self, plan: "QueryPlan", result: Any) -> StateStore:
        """The table's state store: key columns, window bounds (ms) if windowed, then the values."""
        types = {f.name: ksql_type(f.dataType.simpleString()) for f in result.schema.fields}
        bounds = list(WINDOW_BOUNDS) if plan.select.window is not None else []
        values = [n for n, _ in plan.items if n not in plan.key_names and n not in bounds]
        names = list(plan.key_names) + bounds + values
        store = StateStore(list(plan.key_names), bool(bounds), names,
                           [types.get(n, "BIGINT") for n in names])
        self.stores[plan.sink.name] = store
        return store

    def _windowed_table_now(self, table: DataSource) -> StateStore:
        """A windowed table declared over a topic (``WINDOW_TYPE``), which no query of this server
        materializes: its rows now, read from its topic for this pull query (the latest row per
        key and window, as a windowed CTAS's state store holds them)."""
        bounds = list(WINDOW_BOUNDS)
        columns = list(table.key_columns) + [ast.ColumnDef(b, ast.SqlType("BIGINT")) for b in bounds] \
            + list(table.value_columns)
        store = StateStore([c.name for c in table.key_columns], True, [c.name for c in columns],
                           [_ksql_name(c.type) for c in columns])
        read = self._read_table(table, table.window, store, f"ksql-pull-{table.name}")
        log.info("table %s: %d records of %s read", table.name, read, table.topic)
        return store

    def _restore_store(self, plan: "QueryPlan", store: StateStore) -> None:
        """Rebuilds a resumed table's state store from its output topic (read_committed, to the
        end), as Kafka Streams restores a store from its changelog; then the query goes on."""
        restored = self._read_table(plan.sink, plan.select.window, store, f"ksql-restore-{plan.query_id}")
        log.info("state of %s restored from %d records of %s", plan.query_id, restored, plan.sink.topic)

    def _read_table(self, table: DataSource, window: ast.Window | None, store: StateStore, client_id: str) -> int:
        """A table's topic (read_committed, to the end) into ``store``: the latest row per key
        (and window), a tombstone deleting it; a failure is logged and leaves what was read.
        Returns how many records were read."""
        topic = table.topic
        with self._client() as client:
            tps = [TopicPartition(topic, p) for p in client.partitions_for(topic)]
        consumer = Consumer(self.config.bootstrap_servers, auto_offset_reset="earliest", enable_auto_commit=False,
                            isolation_level="read_committed", security=self.config.security,
                            client_id=client_id)
        restored = 0
        avro = self._avro_decoder() if "AVRO" in (table.key_format, table.value_format) else None
        try:
            consumer.assign(tps)
            ends = consumer.end_offsets(tps)
            consumer.seek_to_beginning(tps)
            idle = 0                  # an open transaction keeps read_committed below the end
            while idle < 3 and any(consumer.position(tp) < ends[tp] for tp in tps):
                records = consumer.poll(1000)
                idle = 0 if records else idle + 1
                for r in records:
                    row = decode_output(r.key, r.value, table, store, window, avro)
                    if row is not None and row.pop("__deleted", False):
                        store.delete([store.key_of(row)])          # a windowed row: in its window
                    elif row is not None:
                        store.update([row])
                restored += len(records)
        except Exception as exc:                         # the query still runs; pull queries see less
            log.error("reading table %s from %s failed: %s", table.name, topic, exc)
        finally:
            consumer.close(autocommit=False)
        return restored

    def _security_options(self) -> dict[str, str]:
        """The server's client security properties as the kafkalite source's and sink's ``kafka.*``
        options, every one by its upstream name (as ksqlDB gives its Kafka Streams clients all of
        its ``security.protocol``/``ssl.*``/``sasl.*`` properties): the queries reach the brokers
        as the server's own clients do, a client certificate and host name checking included."""
        return {f"kafka.{k}": v for k, v in self.config.security_properties}

    def _source_frame(self, src: DataSource, offset_reset: str, batch_session: Any = None,
                      tombstones: bool = False, offsets: tuple[str, str] | None = None) -> Any:
        """The input topic as a stream of the source's columns plus ROWTIME/ROWPARTITION/ROWOFFSET
        (and ``__tombstone`` with ``tombstones``); with ``batch_session``, the topic's committed
        records so far (or between the ``offsets`` start and end specs) as a batch DataFrame (with
        ``__tombstone``), decoded the same way."""
        starting = offset_reset if batch_session is None else offsets[0] if offsets is not None else "earliest"
        reader = ((batch_session.read if batch_session is not None else self.spark.readStream).format("kafkalite")
                  .option("kafka.bootstrap.servers", self.config.bootstrap_servers)
                  .option("subscribe", src.topic)
                  .option("startingOffsets", starting)
                  .option("kafka.isolation.level", "read_committed"))
        if batch_session is not None and offsets is not None:
            reader = reader.option("endingOffsets", offsets[1])
        for k, v in self._security_options().items():
            reader = reader.option(k, v)
        if src.value_format == "AVRO":
            reader = reader.option("schemaRegistryUrl", self.config.schema_registry_url or "") \
                .option("valueAvroSubject", f"{src.topic}-value") \
                .option("mode", "FAILFAST" if self.config.fail_on_deserialization_error else "DROPMALFORMED")
            if src.value_schema_id is not None:           # read with the schema the columns came from
                reader = reader.option("valueAvroVersion", self._version_of_id(src, False))
            if not self.config.fail_on_deserialization_error:    # a dropped value: a processing-log message
                reader = reader.option("malformedRecordHandler", deserialization.DROPPED_AVRO_HANDLER) \
                    .option("malformedRecordHandlerArgs", deserialization.dropped_avro_args(
                        src.topic, self.config.processing_log_rows_include, self.processing_log_topic))
        raw = reader.load()
        cols: list[str] = []
        if src.window is not None:                        # Kafka Streams' windowed key: the window apart
            raw = raw.selectExpr("*", *[e.replace(" AS key", " AS `__key`") for e in
                                        join_rules.windowed_key("key", src.window)])
            raw = raw.drop("key").withColumnRenamed("__key", "key")
            cols += ["`WINDOWSTART`", "`WINDOWEND`"]
        keys = src.key_columns
        if keys and src.key_format == "AVRO":
            raw, key_columns = avro_keys.read(
                raw, self.spark, self.config.schema_registry_url or "", src.topic, keys,
                lenient=not self.config.fail_on_deserialization_error,
                version="latest" if src.key_schema_id is None else self._version_of_id(src, True))
            cols += key_columns
        elif len(keys) == 1 and src.key_format == "KAFKA":
            cols.append(f"{kafka_format.read_sql('key', keys[0].type, spark_type(keys[0].type))} AS "
                        f"{quote(keys[0].name)}")
        elif len(keys) == 1 and src.key_format == "JSON":       # unwrapped: the bare JSON value
            field = deserialization.json_value_sql("key", 0, keys[0])     # from its VARIANT, as ksqlDB reads it
            cols.append(f"{from_wire(field, keys[0].type)} AS {quote(keys[0].name)}")
        elif len(keys) == 1 and src.key_format == "DELIMITED":
            cols.append(f"try_cast(CAST(key AS STRING) AS {spark_type(keys[0].type)}) AS {quote(keys[0].name)}")
        elif keys:
            cols += _json_columns("key", keys)
        values = src.value_columns
        if src.value_format == "JSON":
            cols += _json_columns("value", values)
        elif src.value_format == "DELIMITED":
            fields = deserialization.delimited_fields_sql("value", src.value_delimiter)
            for i, c in enumerate(values):                # DATE/TIMESTAMP: days / epoch ms, as ksqlDB writes them
                field = deserialization.delimited_field_sql(fields, i, c.type)
                cols.append(f"{from_wire(field, c.type)} AS {quote(c.name)}")
        elif src.value_format == "KAFKA":
            if len(values) != 1:
                raise KsqlError("The 'KAFKA' format only supports a single field.", statement=src.statement)
            cols.append(f"{kafka_format.read_sql('value', values[0].type, spark_type(values[0].type))} AS "
                        f"{quote(values[0].name)}")
        else:                                             # AVRO: the source decoded it into a struct
            for c in values:
                field = f"value.{quote(_avro_field(raw, c.name))}"
                if c.type.name == "MAP" and _avro_field_kind(raw, c.name) == "array":
                    field = map_of_entries(field)         # Connect's map with non-string keys
                cols.append(f"{field} AS {quote(c.name)}")
        bound = self._json_fields(src)
        for target, columns, unwrapped in bound:          # each JSON field once, as a VARIANT
            raw = deserialization.bind_json_fields(raw, target, target, columns, unwrapped)
        if batch_session is not None or tombstones:
            cols.append("value IS NULL AS `__tombstone`")
        checks = self._deserialization_checks(src)
        raws = ["key AS `__raw_key`", "value AS `__raw_value`"] if checks else []
        carried = [n for target, columns, _ in bound for n in deserialization.json_field_columns(target, columns)]
        parsed = raw.selectExpr(*cols, *raws, *carried, "timestamp AS `__record_time`", "partition AS `ROWPARTITION`",
                                "offset AS `ROWOFFSET`")
        if checks:                                        # poison records skipped and logged, as ksqlDB does
            parsed = deserialization.skip_or_fail(parsed.selectExpr("*", *checks).drop("__raw_key", "__raw_value",
                                                                                      avro_keys.UNDECODED),
                                                  src.topic, self.config.fail_on_deserialization_error,
                                                  self.config.processing_log_rows_include, self.processing_log_topic)
        parsed = parsed.drop(*(n.strip("`") for n in carried))
        return with_event_time(with_time_text(parsed, src), src, self.config.timestamp_throw_on_invalid)

    @staticmethod
    def _json_fields(src: DataSource) -> list[tuple[str, tuple[ast.ColumnDef, ...], bool]]:
        """The JSON objects (a key of several columns, a JSON value) whose fields are read (and,
        in the JSON format, checked) as ksqlDB's JSON deserializer reads them
        (``deserialization.bind_json_fields``): those :func:`_json_columns` reads, and a single
        JSON key (unwrapped: the third item)."""
        out: list[tuple[str, tuple[ast.ColumnDef, ...], bool]] = []
        keys = src.key_columns
        if len(keys) == 1 and src.key_format == "JSON":
            out.append(("key", keys, True))
        elif len(keys) > 1 and src.key_format != "AVRO" or len(keys) == 1 and src.key_format not in (
                "AVRO", "KAFKA", "DELIMITED"):
            out.append(("key", keys, False))
        if src.value_format == "JSON" and src.value_columns:
            out.append(("value", src.value_columns, False))
        return out

    def _deserialization_checks(self, src: DataSource) -> list[str]:
        """The columns :func:`deserialization.skip_or_fail` reads: the cause of a key or value the
        source's formats cannot read (the key's first), which part it is, and its bytes; none if
        nothing of the source is checked here (AVRO)."""
        bound = {target for target, _, _ in self._json_fields(src)}
        key = deserialization.error_sql("`__raw_key`", src.key_format, src.key_columns,
                                        unwrapped=len(src.key_columns) == 1, fields="key" if "key" in bound else None)
        if src.key_format == "AVRO" and src.key_columns:  # decoded by avro_keys' function, which flags failures
            key = None if self.config.fail_on_deserialization_error else \
                deserialization.avro_key_error_sql("`__raw_key`", f"`{avro_keys.UNDECODED}`")
        value = deserialization.error_sql("`__raw_value`", src.value_format, src.value_columns, src.value_delimiter,
                                          fields="value" if "value" in bound else None)
        checks = [(target, sql) for target, sql in (("key", key), ("value", value)) if sql is not None]
        if not checks:
            return []
        error = "coalesce(" + ", ".join(f"({sql})" for _, sql in checks) + ")" if len(checks) > 1 else checks[0][1]
        target = "CASE " + " ".join(f"WHEN ({sql}) IS NOT NULL THEN '{t}'" for t, sql in checks) + " END"
        record = "CASE " + " ".join(f"WHEN ({sql}) IS NOT NULL THEN `__raw_{t}`" for t, sql in checks) + " END"
        return [f"{error} AS `__deser_error`", f"{target} AS `__deser_target`", f"{record} AS `__deser_record`"]

    def _key_sql(self, plan: "QueryPlan") -> str:
        names = plan.key_names
        if not names:
            key = "CAST(NULL AS BINARY)"
        elif plan.sink.key_format == "JSON":
            def wire(n: str) -> str:                      # a DATE/TIMESTAMP key as ksqlDB's JSON writes it
                c = plan.sink.column(n)
                return quote(n) if c is None else to_wire(quote(n), c.type)
            if len(names) == 1:                           # unwrapped (UNWRAP_SINGLES): the bare JSON value
                text = f"to_json(array({wire(names[0])}))"
                key = (f"CASE WHEN {quote(names[0])} IS NOT NULL THEN "
                       f"CAST(substring({text}, 2, length({text}) - 2) AS BINARY) END")
            else:
                key = ("CAST(to_json(named_struct(" + ", ".join(f"'{n}', {wire(n)}" for n in names)
                       + "), map('ignoreNullFields', 'false')) AS BINARY)")   # a null column is written, as ksqlDB does
        elif plan.sink.key_format == "AVRO":
            key = avro_keys.write_sql(self.spark, self.config.schema_registry_url or "", plan.sink, names)
        else:
            if len(names) > 1:
                raise KsqlError(f"The '{plan.sink.key_format}' format only supports a single field. Got: "
                                f"[{', '.join(names)}]", statement=plan.sink.statement)
            column = plan.sink.column(names[0])
            key = (kafka_format.write_sql(quote(names[0]), column.type)
                   if plan.sink.key_format == "KAFKA" and column is not None
                   else f"CAST(CAST({quote(names[0])} AS STRING) AS BINARY)")
        w = plan.select.window
        # a windowed stream's projection keeps its window
        kept = plan.sink.window if w is None and plan.source.window is not None else None
        if (w is not None or kept is not None) and names:
            # Kafka Streams' windowed keys: key bytes + window start (+ end first for sessions), 8 bytes each
            def be(ms: str) -> str:
                return f"unhex(lpad(hex({ms}), 16, '0'))"
            start, end = (("unix_millis(`__window`.start)", "unix_millis(`__window`.end)") if w is not None
                          else ("`__windowstart`", "`__windowend`"))
            window = w or kept
            assert window is not None
            key = (f"concat({key}, {be(end)}, {be(start)})" if window.kind == "SESSION"
                   else f"concat({key}, {be(start)})")
        return f"{key} AS key"

    def _value_sql(self, plan: "QueryPlan", result: Any, tombstones: bool = False) -> list[str]:
        """The value column's expression per VALUE_FORMAT; with ``tombstones``, null where the
        row's ``__tombstone`` is true (a table row deleted)."""
        if tombstones:
            return [f"CASE WHEN `__tombstone` THEN NULL ELSE {sql[:-len(' AS value')]} END AS value"
                    for sql in self._value_sql(plan, result)]
        values = [n for n, _ in plan.items if n not in plan.key_names]
        fmt = plan.sink.value_format
        spark_types = {f.name: sql_type_of_spark(f.dataType.simpleString()) for f in result.schema.fields}

        def wire(n: str) -> str:                          # DATE/TIMESTAMP as ksqlDB's JSON and DELIMITED write them
            t = spark_types.get(n)
            return quote(n) if t is None else to_wire(quote(n), t)
        if fmt == "JSON":
            # null columns are written as null, as ksqlDB writes them (Spark drops them by default)
            return ["to_json(named_struct(" + ", ".join(f"'{n}', {wire(n)}" for n in values)
                    + "), map('ignoreNullFields', 'false')) AS value"]
        if fmt == "DELIMITED":
            return ["concat_ws(',', " + ", ".join(f"CAST({wire(n)} AS STRING)" for n in values) + ") AS value"]
        if fmt == "KAFKA":
            if len(values) != 1:
                raise KsqlError("The 'KAFKA' format only supports a single field.", statement=plan.sink.statement)
            column = plan.sink.column(values[0])
            return [f"{kafka_format.write_sql(quote(values[0]), column.type)} AS value" if column is not None
                    else f"CAST({quote(values[0])} AS STRING) AS value"]
        types = {f.name: f.dataType.simpleString() for f in result.schema.fields}
        self._register_avro(plan, [(n, types.get(n, "string")) for n in values])
        return ["named_struct(" + ", ".join(f"'{n}', {quote(n)}" for n in values) + ") AS value"]

    def _register_avro(self, plan: "QueryPlan", columns: list[tuple[str, str]]) -> None:
        from kafkalite.registry.client import RegistryClient

        if not self.config.schema_registry_url:
            raise KsqlError("Schema registry url is not set (ksql.schema.registry.url)", statement=plan.sink.statement)
        if plan.sink.value_schema_id is not None:         # VALUE_SCHEMA_ID: written with that schema as it is
            return
        schema = _output_value_schema(plan, [n for n, _ in columns], dict(columns))
        assert schema is not None                         # every column's type is known now
        RegistryClient(self.config.schema_registry_url).register(f"{plan.sink.topic}-value", schema)

    def _register_outputs(self, plan: "QueryPlan", text: str) -> None:
        """ksqlDB's ``SchemaRegisterInjector`` for CREATE ... AS SELECT: the output's key and value
        schemas (AVRO) registered under ``<topic>-key`` / ``<topic>-value`` before the statement is
        logged, whatever the subjects hold, so a subject whose compatibility refuses them fails the
        statement (nothing logged, no query started) instead of the query at its start. The
        schemas are those the query registers again when it starts (the same, so no new version):
        the key's from its columns, the value's from the columns' ksqlDB types, or, where only Spark
        knows a type, from the compiled query's, when compiling it has no side effects (a plan
        without table joins or table aggregates); otherwise the value schema is left to the start.
        A side with ``KEY_SCHEMA_ID``/``VALUE_SCHEMA_ID`` (``DefaultSchemaInjector``): the query's
        columns checked against that schema's, which is registered as it is instead."""
        from kafkalite.registry.client import RegistryClient, RegistryClientError

        sink = plan.sink
        if "AVRO" not in (sink.key_format, sink.value_format):
            return
        if not self.config.schema_registry_url:
            raise KsqlError(f"Cannot create topic '{sink.topic}' with format AVRO without configuring "
                            "'ksql.schema.registry.url'", statement=text)
        values = [n for n, _ in plan.items if n not in plan.key_names]
        spark_types: dict[str, str] | None = None
        if sink.value_format == "AVRO" and any(plan.output_types.get(n) is None for n in values) \
                and not plan.joins and plan.upstream is None and not (plan.aggregate and plan.source.kind == "TABLE"):
            result, _ = self._compile(plan)           # analysis only: Spark types the computed columns
            spark_types = {f.name: f.dataType.simpleString() for f in result.schema.fields}
        raw: list[tuple[int, Any, bool]] = []
        for schema_id, is_key in ((sink.key_schema_id, True), (sink.value_schema_id, False)):
            if schema_id is None:
                continue
            registered = self._schema_by_id(sink.topic, schema_id, is_key, text)
            if is_key:
                inferred = schema_ids.key_columns(sink.topic, schema_id, registered, text)
                query = [(n, plan.output_types.get(n)) for n in plan.key_names]
            else:
                inferred = schema_ids.value_columns(sink.topic, schema_id, registered, text)
                query = [(c.name, c.type) for c in _output_columns(plan, values, spark_types, known_only=True)]
            schema_ids.check_columns(query, inferred, is_key, text)
            raw.append((schema_id, registered, is_key))
        subjects: list[tuple[str, str]] = []
        try:
            if sink.key_format == "AVRO" and plan.key_names and sink.key_schema_id is None:
                keys = [sink.column(n) or ast.ColumnDef(n, ast.SqlType("STRING"), key=True) for n in plan.key_names]
                subjects.append((avro_keys.subject(sink.topic),
                                 avro_keys.key_schema(sink.name, keys, sink.key_schema_full_name)))
            if sink.value_format == "AVRO" and sink.value_schema_id is None:
                schema = _output_value_schema(plan, values, spark_types)
                if schema is not None:
                    subjects.append((f"{sink.topic}-value", schema))
        except (ValueError, KsqlError) as exc:
            raise KsqlError(f"Could not register schema for topic: {exc}", statement=text) from None
        client = RegistryClient(self.config.schema_registry_url)
        for subject, schema in subjects:
            try:
                client.register(subject, schema)
            except RegistryClientError as exc:
                raise KsqlError(schema_ids.registration_error(exc), statement=text) from None
        for schema_id, registered, is_key in raw:
            schema_ids.register_raw(self.config.schema_registry_url, sink.topic, schema_id, registered, is_key, text)

    # -- INSERT VALUES / EXPLAIN ------------------------------------------------------------
    def _insert_values(self, s: ast.InsertValues, text: str) -> None:
        """One record produced to the source's topic (ksqlDB writes it directly, not through the
        command topic), encoded as the engine's queries decode that source."""
        source = inserts.writable_source(self.metastore, s.target, self.read_only_topics, text)
        if not self.config.insert_values_enabled:
            raise KsqlError(f"Failed to insert values into '{source.name}'. {inserts.DISABLED}", statement=text)
        row, rowtime = serde.row_of(s, source, text)
        record = serde.encode(source, row, rowtime, self._avro_lookup_for(source) if self.config.schema_registry_url
                              else None,
                              text)
        try:
            self.inserts_producer.send(source.topic, record.value, record.key,
                                       timestamp_ms=record.timestamp_ms).result(30)
        except Exception as exc:
            raise KsqlError(f"Failed to insert values into '{source.name}'. {exc}", statement=text) from None

    def inserts_subscriber(self, target: str, properties: dict[str, Any] | None = None) -> inserts.InsertsSubscriber:
        """``/inserts-stream``'s writer for one request (ksqlDB's ``InsertsStreamEndpoint``): the
        target checked (unknown, windowed, a read-only topic), then the engine's shared producer."""
        if not self.config.insert_values_enabled:
            raise KsqlError(inserts.DISABLED, code=BAD_REQUEST)
        source = inserts.resolve_target(self.metastore, target, self.read_only_topics)
        self.inserts_producer.ready()
        return inserts.InsertsSubscriber(source, self.inserts_producer,
                                         self._avro_lookup_for(source) if self.config.schema_registry_url else None)

    def _make_inserts_producer(self) -> Producer:
        """The producer behind ``inserts_producer`` (idempotent: a retried batch is written once)."""
        return Producer(self.config.bootstrap_servers, enable_idempotence=True, security=self.config.security,
                        client_id=f"ksql-insert-{self.config.service_id}")

    def _avro_lookup_for(self, source: DataSource) -> serde.AvroLookup:
        """The schemas INSERT VALUES writes ``source``'s keys and values with: those its
        KEY_SCHEMA_ID / VALUE_SCHEMA_ID name, else the subjects' latest."""
        pinned = {avro_keys.subject(source.topic): source.key_schema_id, f"{source.topic}-value": source.value_schema_id}

        def lookup(subject: str) -> tuple[int, Any, list[str]]:
            schema_id = pinned.get(subject)
            if schema_id is None:
                return self._avro_lookup(subject)
            from kafkalite.registry.client import RegistryClient
            return _lookup_answer(RegistryClient(str(self.config.schema_registry_url)).by_id(schema_id))
        return lookup

    def _avro_lookup(self, subject: str) -> tuple[int, Any, list[str]]:
        from kafkalite.registry.client import RegistryClient

        return _lookup_answer(RegistryClient(str(self.config.schema_registry_url)).latest(subject))

    def _explain(self, s: ast.Explain, text: str, props: dict[str, Any]) -> Entity:
        """ksqlDB's ``queryDescription``: a running persistent query by id, or a statement planned
        and compiled (not run) as it would run now; the topology is Spark's plan of the query."""
        if s.query_id is not None:
            q = self.metastore.queries.get(s.query_id)
            found = self.plans.get(s.query_id)
            if q is None or q.state == "TERMINATED" or found is None:
                raise KsqlError(f"Query with id:{s.query_id} does not exist, use SHOW QUERIES to view the full "
                                "set of queries.", statement=text)
            plan, sql = found
            running = self.running.get(q.id)
            topology = running._jsq.explainInternal(True) if running is not None else ""
            host = "%s:%d" % self.config.listener
            return _query_description(text, plan, q.statement, sql, topology, "PERSISTENT", {host: self._state(q)},
                                      q.error, q.properties)
        assert s.statement is not None
        if not isinstance(s.statement, (ast.CreateAsSelect, ast.InsertInto)) and s.statement.query.emit != "CHANGES":
            raise KsqlError("The provided statement does not run a ksql query", statement=text)
        transient = isinstance(s.statement, ast.Query)
        query_id = (f"transient_{s.statement.query.source}_0" if isinstance(s.statement, ast.Query)
                    else _query_id(s.statement, self.last_sequence + 1))
        plan = self._plan(s.statement, s.text, props, query_id)
        compiled, sql = self._compile(plan)
        frame = compiled.stream if isinstance(compiled, TableJoin) else compiled.changes \
            if isinstance(compiled, TableAggregate) else compiled
        topology = frame._jdf.queryExecution().toString()
        return _query_description(text, plan, s.text, sql, topology, "PUSH" if transient else "PERSISTENT", {},
                                  None, props)

    # -- SHOW / DESCRIBE ----------------------------------------------------------------------
    def _show(self, s: ast.Show, text: str, props: dict[str, Any]) -> Entity:
        ms = self.metastore
        if s.extended and s.what in ("STREAMS", "TABLES"):      # ksqlDB's SourceDescriptionList
            sources = [d for d in sorted(ms.sources.values(), key=lambda d: d.name) if d.kind == s.what[:-1]]
            metadata = self._topic_metadata(sorted({d.topic for d in sources})) if sources else {}
            described = [self._source_description(d, True, metadata) for d in sources]
            return {"@type": "source_descriptions", "statementText": text, "sourceDescriptions": described,
                    "warnings": []}
        if s.extended and s.what == "QUERIES":                    # ksqlDB's QueryDescriptionList
            explained = [self._explain(ast.Explain(q.id), text, props)["queryDescription"]
                         for q in ms.live_queries() if q.id in self.plans]
            return {"@type": "query_descriptions", "statementText": text, "queryDescriptions": explained,
                    "warnings": []}
        if s.what in ("STREAMS", "TABLES"):
            kind = s.what[:-1]
            items = [{"type": kind, "name": d.name, "topic": d.topic, "keyFormat": d.key_format,
                      "valueFormat": d.value_format, "isWindowed": d.window is not None}
                     for d in sorted(ms.sources.values(), key=lambda d: d.name) if d.kind == kind]
            return {"@type": s.what.lower(), "statementText": text, s.what.lower(): items, "warnings": []}
        if s.what == "QUERIES":
            queries = [{"queryString": q.statement, "sinks": [q.sink] if q.sink else [],
                        "sinkKafkaTopics": [ms.sources[q.sink].topic] if q.sink in ms.sources else [],
                        "id": q.id, "statusCount": {self._state(q): 1}, "queryType": "PERSISTENT",
                        "state": self._state(q)} for q in ms.live_queries()]
            return {"@type": "queries", "statementText": text, "queries": queries, "warnings": []}
        if s.what == "TOPICS":
            listed = self._topic_metadata(None)
            counts = self._topic_consumers() if s.extended else {}
            topics: list[dict[str, Any]] = [
                {"name": name, "replicaInfo": [len(p.replicas) for _, p in sorted(t.partitions.items())]}
                for name, t in sorted(listed.items()) if not t.internal and not name.startswith("_")]
            if s.extended:                                        # ksqlDB's KafkaTopicsListExtended
                for topic in topics:
                    topic["consumerCount"], topic["consumerGroupCount"] = counts.get(topic["name"], (0, 0))
                return {"@type": "kafka_topics_extended", "statementText": text, "topics": topics, "warnings": []}
            return {"@type": "kafka_topics", "statementText": text, "topics": topics, "warnings": []}
        # ksqlDB's ListPropertiesExecutor: the server's properties, defaults included, merged with
        # the request's; "overwrittenProperties" names those whose value the request changed (one
        # set to the server's own value is not), "defaultProperties" those at their default value
        server = self.config.listed_properties()
        requested = {(k if k.startswith("ksql.") else f"ksql.streams.{k}"): str(v) for k, v in props.items()}
        merged = {**server, **requested}
        return {"@type": "properties", "statementText": text, "properties": [
            {"name": k, "scope": "KSQL", "value": v} for k, v in sorted(merged.items())],
            "overwrittenProperties": sorted(k for k, v in requested.items() if server.get(k) != v),
            "defaultProperties": sorted(k for k, v in merged.items() if _DEFAULT_PROPERTIES.get(k) == v),
            "warnings": []}

    def _topic_consumers(self) -> dict[str, tuple[int, int]]:
        """Per topic, SHOW TOPICS EXTENDED's (consumerCount, consumerGroupCount) counted as ksqlDB's
        ListTopicsExecutor counts them: every consumer group's members, one consumer per partition
        of the topic a member is assigned (ksqlDB's count, which is per assigned partition), and
        the groups with any such member."""
        partitions: dict[str, int] = {}
        groups: dict[str, set[str]] = {}
        with Admin(self.config.bootstrap_servers, security=self.config.security) as admin:
            for group_id, protocol_type in admin.list_groups():
                if protocol_type != "consumer":
                    continue
                for member in admin.describe_group(group_id).members:
                    for tp in member.assignment:
                        partitions[tp.topic] = partitions.get(tp.topic, 0) + 1
                        groups.setdefault(tp.topic, set()).add(group_id)
        return {topic: (n, len(groups[topic])) for topic, n in partitions.items()}

    def _state(self, q: PersistentQuery) -> str:
        running = self.running.get(q.id)
        if running is not None and not running.isActive:
            q.state = "ERROR"
            q.error = str(running.exception())
        return q.state

    def _describe(self, s: ast.Describe, text: str) -> Entity:
        d = self.metastore.get(s.name)
        if d is None:
            raise KsqlError(f"Could not find STREAM/TABLE '{s.name}' in the Metastore", statement=text)
        # ksqlDB's DescribeExecutor asks the topic only when EXTENDED
        topics = self._topic_metadata([d.topic]) if s.extended else {}
        return {"@type": "sourceDescription", "statementText": text,
                "sourceDescription": self._source_description(d, s.extended, topics), "warnings": []}

    def _topic_metadata(self, names: list[str] | None) -> dict[str, Any]:
        """These topics' metadata, in one request (not the whole cluster's; None: every topic)."""
        with self._client() as client:
            return dict(client.metadata(names).topics)

    def _client(self) -> KafkaClient:
        """A client of the brokers with the server's security settings, for one statement's requests."""
        return KafkaClient(self.config.bootstrap_servers, security=self.config.security)

    def _source_description(self, d: DataSource, extended: bool, topics: Mapping[str, Any]) -> Entity:
        """ksqlDB's ``SourceDescription`` of ``d``; ``topics``: the metadata EXTENDED counts its
        topic's partitions and replicas from."""
        readers, writers = self.metastore.readers_and_writers(d.name)
        fields = [{"name": "ROWTIME", "schema": {"type": "BIGINT", "fields": None, "memberSchema": None}}] \
            if extended else []
        fields += [{"name": c.name, "schema": _schema_json(c.type),
                    **({"type": "KEY"} if c.key else {})}       # FieldInfo.FieldType: SYSTEM, KEY, HEADER
                   for c in d.columns]
        partitions = replication = 0
        topic = topics.get(d.topic)
        if topic is not None and topic.partitions:
            partitions = len(topic.partitions)
            replication = len(topic.partitions[min(topic.partitions)].replicas)
        return {
            "name": d.name, "windowType": d.window.kind if d.window else None,
            "readQueries": [{"id": r} for r in readers], "writeQueries": [{"id": w} for w in writers],
            "fields": fields, "type": d.kind, "timestamp": d.timestamp or "", "statistics": "", "errorStats": "",
            "extended": extended, "keyFormat": d.key_format, "valueFormat": d.value_format, "topic": d.topic,
            "partitions": partitions, "replication": replication, "statement": d.statement,
            "queryOffsetSummaries": [], "sourceConstraints": []}


class TableJoin:
    """A compiled stream-table join: the stream's DataFrame, the join each micro-batch needs, and
    what frees a micro-batch's cached rows once its join has been written."""

    def __init__(self, stream: Any, per_batch: Callable[[Any], Any],
                 release: Callable[[], None] = lambda: None) -> None:
        self.stream = stream
        self.per_batch = per_batch
        self.release = release


class TableTableJoin(TableJoin):
    """A compiled table-table join: the joined tables' changed keys as a stream, the joined
    rows those keys touch per micro-batch, and the SQL of the keys whose output row may change
    (run after ``per_batch``, over the views it made), for the tombstones of rows gone."""

    def __init__(self, changes: Any, per_batch: Callable[[Any], Any],
                 prepare: Callable[..., tuple[list[Any], str, str]], sql: str, candidates_sql: str) -> None:
        super().__init__(changes, per_batch)
        self.prepare = prepare                    # (batch, batch id): the views; its change rows and SQL texts
        self.sql = sql                            # the join over those views
        self.candidates_sql = candidates_sql


class TableAggregate:
    """A compiled table aggregate: the table's records as a stream, the view names its SQL reads
    (``<view>_changed``: rows whose groups ``groups`` computes; ``<view>_table``: the rows of the
    groups to aggregate), the aggregate's SQL and, per group key, the SQL of the row of a group
    with no row left."""

    def __init__(self, changes: Any, view: str, groups: str, sql: str,
                 emptied: Callable[[tuple[Any, ...]], str]) -> None:
        self.changes = changes
        self.view = view
        self.groups = groups
        self.sql = sql
        self.emptied = emptied


class QueryPlan:
    def __init__(self, query_id: str, source: DataSource, sink: DataSource, select: ast.Select,
                 items: list[tuple[str, ast.Expr]], key_exprs: list[ast.Expr], key_names: list[str],
                 aggregate: bool, offset_reset: str, with_props: dict[str, object] | None = None,
                 joins: list[tuple[ast.Join, DataSource, str]] | None = None,
                 scope: "set[str] | Scope | None" = None) -> None:
        self.query_id = query_id
        self.source = source
        self.sink = sink
        self.select = select
        self.items = items
        self.key_exprs = key_exprs
        self.key_names = key_names
        self.aggregate = aggregate
        self.offset_reset = offset_reset
        self.with_props = with_props or {}
        self.joins = joins or []                   # (join, joined source, its alias), in order
        self.scope = scope if scope is not None else {c.name for c in source.columns} | set(PSEUDO)
        self.upstream: QueryPlan | None = None     # an aggregate over a join: the join's own query
        self.materialize_only = False              # a SOURCE TABLE's CST query: its state store, no sink
        self.owner: str | None = None              # the persistent query an upstream query belongs to
        #: each output column's ksqlDB type where known before Spark runs (None: Spark's to decide)
        self.output_types: dict[str, ast.SqlType | None] = {}

    @property
    def source_names(self) -> tuple[str, ...]:
        if self.upstream is not None:               # the upstream join's, then this query's own joins'
            return self.upstream.source_names + tuple(d.name for _, d, _ in self.joins)
        return (self.source.name,) + tuple(d.name for _, d, _ in self.joins)


#: DROP's DELETE TOPIC clause at the end of its text (the parser's DELETE_TOPIC token)
_DELETE_TOPIC = re.compile(r"\s+DELETE\s+TOPIC\s*$", re.IGNORECASE)
#: the compiled queries' hidden event-time column, written as each output record's CreateTime
EVENT_TIME = "__rowtime"
OUTPUT_TIMESTAMP = f"`{EVENT_TIME}` AS timestamp"


def _event_time(plan: QueryPlan) -> str:
    """The output record's timestamp as ksqlDB (Kafka Streams) gives it, as a select item: the
    input record's ROWTIME (its TIMESTAMP column if the source names one) for projections,
    filters and stream-table joins; the later of the joined records' for a stream-stream or a
    table-table join
    (``greatest`` skips an outer join's missing side); and for an aggregate the latest ROWTIME
    of the records that formed the row (Kafka Streams' timestamped stores, KIP-258), which Spark
    keeps in the group's state across micro-batches, windowed or not."""
    timed = [plan.select.alias or plan.source.name] + [alias for _, d, alias in plan.joins
                                                        if plan.source.kind == "TABLE" or d.kind == "STREAM"]
    if plan.aggregate:
        expr = "max(`ROWTIME`)"
    elif len(timed) > 1:                              # the streams' records (a stream-table join: the stream's)
        expr = "greatest(" + ", ".join(f"{quote(a)}.`ROWTIME`" for a in timed) + ")"
    elif plan.joins:
        expr = f"{quote(timed[0])}.`ROWTIME`"
    else:
        expr = "`ROWTIME`"
    return f"{expr} AS {quote(EVENT_TIME)}"


def window_bounds(wexpr: str, window: ast.Window) -> str:
    """A windowed aggregate's bounds as ksqlDB gives them (WINDOWSTART, WINDOWEND, the windowed
    key): Spark's window for tumbling and hopping windows; for a session, Kafka Streams' session
    window ends at its last record, where Spark's ``session_window`` ends a gap later."""
    if window.kind != "SESSION":
        return wexpr
    return (f"named_struct('start', {wexpr}.start, 'end', {wexpr}.end - INTERVAL {window.size_ms} MILLISECONDS)")


def _rows_frame(session: Any, rows: list[dict[str, Any]], schema: Any) -> Any:
    """Rows kept by a ``TableState`` back as a DataFrame of the table's decoded columns."""
    return session.createDataFrame([tuple(r.get(f.name) for f in schema.fields) for r in rows], schema)


def _checkpointed_offsets(checkpoint: Path, batch_id: int) -> str | None:
    """The source offsets (JSON) at the end of micro-batch ``batch_id`` in a Spark checkpoint's
    offset log (``offsets/<id>``: a version line, the batch's metadata, then one line per source),
    where the next batch starts; None if the log has no such batch."""
    try:
        lines = (checkpoint / "offsets" / str(batch_id)).read_text().splitlines()
    except OSError:
        return None
    return lines[2] if len(lines) > 2 and lines[0].startswith("v") else None


def _committed_offsets(checkpoint: Path) -> str | None:
    """The source offsets (JSON) where a resumed single-source query goes on: the end of the last
    micro-batch in the checkpoint's commit log (a batch Spark planned but did not commit runs
    again from there); None if no batch was committed (it starts over)."""
    try:
        committed = [int(n) for n in (p.name for p in (checkpoint / "commits").iterdir()) if n.isdigit()]
    except OSError:
        return None
    return _checkpointed_offsets(checkpoint, max(committed)) if committed else None


def _checkpointed_sources(checkpoint: Path, batch_id: int) -> list[str] | None:
    """Every source's offsets (one JSON per source, ``{topic: {partition: offset}}``) at the end
    of micro-batch ``batch_id`` in a Spark checkpoint's offset log; None if it has no such batch."""
    try:
        lines = (checkpoint / "offsets" / str(batch_id)).read_text().splitlines()
    except OSError:
        return None
    return lines[2:] if len(lines) > 2 and lines[0].startswith("v") else None


def _topic_offsets(sources: list[str], topic: str) -> str | None:
    """The offsets JSON of the source that reads ``topic``, among a batch's sources'."""
    for line in sources:
        try:
            offsets = json.loads(line)
        except ValueError:
            continue
        if isinstance(offsets, dict) and topic in offsets:
            return json.dumps({topic: offsets[topic]})
    return None


def _store_row(row: dict[str, Any], windowed: bool) -> dict[str, Any]:
    """A result row for the state store: Spark's ``__window`` struct as WINDOWSTART/WINDOWEND in ms."""
    row.pop(EVENT_TIME, None)
    window = row.pop("__window", None)
    if windowed and window is not None:
        row["WINDOWSTART"] = int(window["start"].timestamp() * 1000)
        row["WINDOWEND"] = int(window["end"].timestamp() * 1000)
    return row


def with_time_text(parsed: Any, src: DataSource) -> Any:
    """TIME columns as the queries see them (``HH:mm:ss``, ``.SSS`` when there are milliseconds)
    from what ksqlDB writes: milliseconds of the day (Avro ``time-millis``, a JSON number or
    numeric text, a DELIMITED field); text that is already a time stays as it is."""
    times = {c.name for c in src.columns if c.type.name == "TIME"}
    if not times:
        return parsed
    items = []
    for name in parsed.columns:
        if name not in times:
            items.append(quote(name))
            continue
        text, ms = f"CAST({quote(name)} AS STRING)", f"CAST({quote(name)} AS BIGINT)"
        two = [f"lpad(CAST({part} AS STRING), 2, '0')" for part in
               (f"{ms} div 3600000", f"({ms} div 60000) % 60", f"({ms} div 1000) % 60")]
        formatted = (f"concat({two[0]}, ':', {two[1]}, ':', {two[2]}, CASE WHEN {ms} % 1000 = 0 THEN '' "
                     f"ELSE concat('.', lpad(CAST({ms} % 1000 AS STRING), 3, '0')) END)")
        items.append(f"CASE WHEN {text} RLIKE '^[0-9]+$' THEN {formatted} ELSE {text} END AS {quote(name)}")
    return parsed.selectExpr(*items)


def with_event_time(parsed: Any, src: DataSource, throw_on_invalid: bool = False) -> Any:
    """``parsed`` (the source's columns and the record's ``__record_time``) with ROWTIME: the
    record's timestamp, or the source's TIMESTAMP column. A record whose column is null or
    negative has no valid event time: ksqlDB's extractor (``LoggingTimestampExtractor``) then
    returns -1 and Kafka Streams skips the record, so the query drops it here; with
    ``ksql.timestamp.throw.on.invalid=true`` the query fails instead, as ksqlDB's does."""
    ts_col = src.column(src.timestamp) if src.timestamp else None
    if ts_col is None:
        return parsed.withColumnRenamed("__record_time", "ROWTIME")
    rowtime = (quote(ts_col.name) if ts_col.type.name == "TIMESTAMP"
               else f"timestamp_millis(CAST({quote(ts_col.name)} AS BIGINT))")
    invalid = f"({quote(ts_col.name)} IS NULL OR unix_millis({rowtime}) < 0)"
    if throw_on_invalid:
        message = f"Failed to extract timestamp from row: column {ts_col.name} is null or negative"
        timed = parsed.selectExpr("*", f"CASE WHEN {invalid} THEN raise_error('{message}') ELSE {rowtime} END "
                                       "AS `ROWTIME`")
    else:
        timed = parsed.where(f"NOT {invalid}").selectExpr("*", f"{rowtime} AS `ROWTIME`")
    return timed.drop("__record_time")


def _lookup_answer(registered: Any) -> tuple[int, Any, list[str]]:
    """``serde.AvroLookup``'s answer for a registry schema: its id, parsed, its record's fields."""
    from kafkalite.registry.serde import parse_avro

    doc = json.loads(registered.schema)                   # an unwrapped key's schema is no record
    return registered.schema_id, parse_avro(registered.schema, registered.dependencies), [
        f["name"] for f in (doc.get("fields", []) if isinstance(doc, dict) else [])]


def _output_columns(plan: "QueryPlan", values: list[str], spark_types: dict[str, str] | None,
                    known_only: bool = False) -> list[ast.ColumnDef]:
    """The output value columns with the types the query writes: a column's ksqlDB type where the
    plan knows it (a TIME as the STRING Spark carries it), else the result's Spark type
    (``spark_types``). A column neither gives is left out with ``known_only``; otherwise
    KeyError names it."""
    out = []
    for name in values:
        t = plan.output_types.get(name)
        if t is None and spark_types is not None:
            t = spark_column(name, spark_types.get(name, "string")).type
        if t is None:
            if known_only:
                continue
            raise KeyError(name)
        out.append(ast.ColumnDef(name, _as_written(t)))
    return out


def _output_value_schema(plan: "QueryPlan", values: list[str], spark_types: dict[str, str] | None) -> str | None:
    """The Avro schema ksqlDB registers for a query's output values (every field optional, as
    ``serde.value_avro_schema`` writes it) from :func:`_output_columns`, its record named by the
    sink's ``VALUE_SCHEMA_FULL_NAME`` (default ksqlDB's ``KsqlDataSourceSchema``); None if a
    column's type needs Spark's and ``spark_types`` is not given."""
    try:
        defs = _output_columns(plan, values, spark_types)
    except KeyError:
        return None
    try:
        return serde.value_avro_schema(defs, plan.sink.value_schema_full_name)
    except ValueError as exc:
        raise KsqlError(str(exc)) from None


def _as_written(t: ast.SqlType) -> ast.SqlType:
    """A type as a query writes it: TIME (Spark has no time of day) as STRING, inside too."""
    if t.name == "TIME":
        return ast.SqlType("STRING")
    if t.items or t.fields:
        return replace(t, items=tuple(_as_written(i) for i in t.items),
                       fields=tuple((n, _as_written(f)) for n, f in t.fields))
    return t


def formats_of(props: dict[str, Any], key_default: str, value_default: str, text: str) -> tuple[str, str]:
    """A WITH clause's key and value formats: ``KEY_FORMAT``/``VALUE_FORMAT``, or ``FORMAT`` for
    both (refused beside either, in ksqlDB's words: CommonCreateConfigs.validateKeyValueFormats),
    else the defaults (a CREATE's, or a query's first source's)."""
    both = props.get("FORMAT")
    for name in ("KEY_FORMAT", "VALUE_FORMAT"):
        if both is not None and props.get(name) is not None:
            raise KsqlError(f"Cannot supply both '{name}' and 'FORMAT' properties, as 'FORMAT' sets both key and "
                            "value formats. Either use just 'FORMAT', or use 'KEY_FORMAT' and 'VALUE_FORMAT'.",
                            statement=text)
    return (str(props.get("KEY_FORMAT") or both or key_default).upper(),
            str(props.get("VALUE_FORMAT") or both or value_default).upper())


def _json_columns(field: str, columns: tuple[ast.ColumnDef, ...]) -> list[str]:
    """JSON fields read from the record's one VARIANT parse (the frame went through
    ``deserialization.bind_json_fields``: each top-level field matched by its upper- or lower-case
    name) as ksqlDB's JSON deserializer reads them, at any depth (struct fields whatever their case;
    :func:`deserialization.json_value_sql`), then DATE/TIMESTAMP from their wire form."""
    return [f"{from_wire(deserialization.json_value_sql(field, i, c), c.type)} AS {quote(c.name)}"
            for i, c in enumerate(columns)]


def _avro_field(raw: Any, upper: str) -> str:
    struct = raw.schema["value"].dataType
    return next((f.name for f in struct.fields if f.name.upper() == upper), upper)


def _avro_field_kind(raw: Any, upper: str) -> str | None:
    """The Spark type name (``array``, ``map``...) of an Avro value field, None if absent."""
    struct = raw.schema["value"].dataType
    return next((f.dataType.typeName() for f in struct.fields if f.name.upper() == upper), None)


def _schema_json(t: ast.SqlType) -> dict[str, Any]:
    """ksqlDB's ``SchemaInfo``: the type is its ``SqlBaseType`` name (INTEGER, STRING, DECIMAL...),
    a DECIMAL's precision and scale go in ``parameters`` (absent for other types)."""
    if t.name == "ARRAY":
        return {"type": "ARRAY", "fields": None, "memberSchema": _schema_json(t.items[0])}
    if t.name == "MAP":
        return {"type": "MAP", "fields": None, "memberSchema": _schema_json(t.items[1])}
    if t.name == "STRUCT":
        return {"type": "STRUCT", "fields": [{"name": n, "schema": _schema_json(ft)} for n, ft in t.fields],
                "memberSchema": None}
    if t.name == "DECIMAL":
        precision, scale = t.params
        return {"type": "DECIMAL", "fields": None, "memberSchema": None,
                "parameters": {"precision": precision, "scale": scale}}
    return {"type": _BASE_TYPES.get(t.name, t.name), "fields": None, "memberSchema": None}


#: the properties SHOW PROPERTIES lists, at their defaults (a server with no properties file)
_DEFAULT_PROPERTIES = KsqlConfig().listed_properties()

#: ksqlDB's PullQueryValidator: what a pull query may not have, each with its refusal (checked in
#: this order, the first one found answers); ``PULL_QUERY_SYNTAX_HELP`` follows the refusal
_PULL_RULES: tuple[tuple[Callable[[ast.Select], bool], str], ...] = (
    (lambda q: bool(q.joins), "Pull queries don't support JOIN clauses."),
    (lambda q: q.window is not None, "Pull queries don't support WINDOW clauses."),
    (lambda q: bool(q.group_by), "Pull queries don't support GROUP BY clauses."),
    (lambda q: q.partition_by is not None, "Pull queries don't support PARTITION BY clauses."),
    (lambda q: q.having is not None, "Pull queries don't support HAVING clauses."),
    (lambda q: q.emit is not None, "Pull queries don't support EMIT clauses."),
)
_PULL_QUERY_SYNTAX_HELP = " See https://cnfl.io/queries for more info.\nAdd EMIT CHANGES if you intended to issue a push query."


def _names_and_types(frame: Any) -> tuple[list[str], list[str]]:
    """A projected frame's column names and their ksqlDB types (a transient query's header)."""
    fields = frame.schema.fields
    return [f.name for f in fields], [ksql_type(f.dataType.simpleString()) for f in fields]


def _view_name(plan: "QueryPlan") -> str:
    """The temporary view a query's decoded source is registered as, for its Spark SQL."""
    return f"ksql_{plan.query_id.lower()}"


def _check_pull(q: ast.Select, text: str) -> None:
    """A pull query (no EMIT CHANGES), on a table or a stream, refused as ksqlDB's
    PullQueryValidator refuses it: the first clause it does not support, then the syntax help."""
    for breaks, refusal in _PULL_RULES:
        if breaks(q):
            raise KsqlError(refusal + _PULL_QUERY_SYNTAX_HELP, statement=text)


def _not_queryable(table: str) -> str:
    """ksqlDB's answer to a pull query on a table no running query materializes (a plain CREATE
    TABLE, or a CREATE TABLE AS SELECT whose query was terminated): EngineExecutor's
    ``notMaterializedException`` with the pull-query syntax help, word for word, since clients and
    habits match on it."""
    return (f"The `{table}` table isn't queryable. To derive a queryable table, you can do "
            f"'CREATE TABLE QUERYABLE_{table} AS SELECT * FROM {table}'." + _PULL_QUERY_SYNTAX_HELP)


#: our type names that ksqlDB's SqlBaseType spells otherwise
_BASE_TYPES = {"INT": "INTEGER", "VARCHAR": "STRING"}


def _query_description(text: str, plan: QueryPlan, statement: str, sql: str, topology: str, query_type: str,
                       host_status: dict[str, str], error: str | None, overridden: dict[str, Any]) -> Entity:
    """ksqlDB's ``QueryDescriptionEntity`` (``@type: queryDescription``); ``overridden``: the request
    properties the query runs with (ksqlDB's ``QueryMetadata.getOverriddenProperties``)."""
    fields = [{"name": c.name, "schema": _schema_json(c.type), **({"type": "KEY"} if c.key else {})}
              for c in plan.sink.columns]
    state = ("ERROR" if "ERROR" in host_status.values() else "RUNNING") if host_status else None
    return {"@type": "queryDescription", "statementText": text, "queryDescription": {
        "id": plan.query_id, "statementText": statement,
        "windowType": plan.select.window.kind if plan.select.window else None, "fields": fields,
        "sources": list(plan.source_names), "sinks": [plan.sink.name] if query_type == "PERSISTENT" else [],
        "topology": topology, "executionPlan": sql, "overriddenProperties": dict(overridden),
        "ksqlHostQueryStatus": host_status,
        "queryType": query_type, "queryErrors": [] if error is None else [
            {"timestamp": 0, "errorMessage": error, "type": "UNKNOWN"}],
        "tasksMetadata": [], "state": state,
        # Spark, not a Kafka Streams application, consumes the source: there is no consumer group
        "consumerGroupId": ""},
        "warnings": []}


def _first_line(exc: BaseException) -> str:
    """An exception's first line (Spark's carry the JVM stack trace after it); when that line
    ends where a Python traceback starts (an error raised in Python code Spark called, as in
    foreachBatch), the traceback's own exception line is added, since it says what went wrong."""
    text = str(exc).strip()
    if not text:
        return type(exc).__name__
    lines = text.splitlines()
    first = lines[0].rstrip()
    if first.startswith("An error occurred while calling ") and len(lines) > 1 and lines[1].startswith(": "):
        first += " " + lines[1][2:].strip()               # py4j's line names the call, the next the Java error
    if first.endswith("Traceback (most recent call last):"):
        cause = next((line.strip() for line in lines[1:] if _PY_ERROR_LINE.match(line)), None)
        if cause is not None:
            first = first[:-len("Traceback (most recent call last):")].rstrip() + " " + cause
    return first


#: the last line of a Python traceback: ``SomeError: message`` at the start of a line
_PY_ERROR_LINE = re.compile(r"^[A-Za-z_][\w.]*(Error|Exception|Exit|Interrupt): ")


def _ksql_name(t: ast.SqlType) -> str:
    """A SQL type as ksqlDB names it in query headers (INT is INTEGER there)."""
    return "INTEGER" if t.name == "INT" else str(t)


def _query_id(s: ast.CreateAsSelect | ast.InsertInto, seq: int) -> str:
    """ksqlDB's query ids: CSAS_<SINK>_<n>, CTAS_<SINK>_<n>, INSERTQUERY_<n> (n: the command's offset)."""
    if isinstance(s, ast.InsertInto):
        return f"INSERTQUERY_{seq}"
    return f"{'CSAS' if s.kind == 'STREAM' else 'CTAS'}_{s.name}_{seq}"


def _join_key(join: ast.Join, items: list[tuple[str, ast.Expr]], scope: "set[str] | Scope", kind: str,
              s: ast.CreateAsSelect | ast.InsertInto | ast.Query, text: str) -> list[ast.Expr]:
    """A join's output key: the projected join column (either side of ON), as ksqlDB keys a
    join's result; a persistent query must project it (ksqlDB's 'Key missing from projection')."""
    assert isinstance(join.on, ast.Binary)
    sides = [_qualified(join.on.left, scope), _qualified(join.on.right, scope)]
    for _, e in items:
        if isinstance(e, ast.Column) and _qualified(e, scope) in sides:
            return [e]
    if isinstance(s, ast.Query):
        return []
    first = sides[0]
    name = s.name if isinstance(s, ast.CreateAsSelect) else s.target
    raise KsqlError(f"Key missing from projection (ie, SELECT). See https://cnfl.io/2LV7ouS.\nThe query used to "
                    f"build `{name}` must include the join expression {first.source}.{first.name} in its "
                    f"projection (eg, SELECT {first.source}.{first.name}...).", statement=text)


#: ksqlDB's JoinNode.JoinType names, as its join refusals print them
_JOIN_WORDS = {"INNER": "[INNER] JOIN", "LEFT": "LEFT [OUTER] JOIN", "RIGHT": "RIGHT [OUTER] JOIN",
               "FULL": "[FULL] OUTER JOIN"}


def _join_sides(on: ast.Binary, alias: str, right: DataSource, lefts: list[tuple[str, DataSource]],
                text: str) -> tuple[ast.Column, ast.Column]:
    """The ON equality's column of the joined (right) source and the column of the sources
    before it, both qualified with their alias (as ksqlDB prints a join condition)."""
    def owner(c: ast.Column) -> str | None:
        if c.source is not None:
            return c.source
        if right.column(c.name) is not None:
            return alias
        return next((a for a, d in lefts if d.column(c.name) is not None), None)
    assert isinstance(on.left, ast.Column) and isinstance(on.right, ast.Column)
    sides = [ast.Column(c.name, owner(c)) for c in (on.left, on.right)]
    mine = [c for c in sides if c.source == alias]
    others = [c for c in sides if c.source != alias]
    if len(mine) != 1 or len(others) != 1:
        raise KsqlError(f"Invalid comparison expression '{_expr_text(on)}' in join '{_expr_text(on)}'. Each side "
                        "of the join comparision must contain references from exactly one source.", statement=text)
    return mine[0], others[0]


def _or_list(words: list[str]) -> str:
    """ksqlDB's ``GrammaticalJoiner.or()``: ``A, B or C``."""
    return words[0] if len(words) == 1 else ", ".join(words[:-1]) + " or " + words[-1]


def _synthetic_key(src: DataSource, joins: list[tuple[ast.Join, DataSource, str]], left: str) -> ast.Expr | None:
    """A FULL OUTER table-table join's key: no source column equals it (either side may be
    missing), so ksqlDB adds the synthetic key column ROWKEY, the first non-null of the keys."""
    if src.kind != "TABLE" or not any(j.kind == "FULL" for j, _, _ in joins):
        return None
    keys = [ast.Column(src.key_columns[0].name, left)] + [ast.Column(d.key_columns[0].name, a) for _, d, a in joins]
    return ast.Call("COALESCE", tuple(keys))


def _table_join_key(src: DataSource, joins: list[tuple[ast.Join, DataSource, str]], left: str,
                    items: list[tuple[str, ast.Expr]], synthetic: ast.Expr | None,
                    s: ast.CreateAsSelect | ast.InsertInto | ast.Query, text: str) -> list[ast.Expr]:
    """A table-table join's primary key, which a persistent query must project (ksqlDB's
    ``JoinNode.validateKeyPresent``): ROWKEY for a FULL OUTER join, the left table's key for a
    foreign-key join, else one of the joined key columns."""
    name = s.name if isinstance(s, ast.CreateAsSelect) else s.target if isinstance(s, ast.InsertInto) else ""
    if synthetic is not None:
        if any(e == synthetic for _, e in items) or isinstance(s, ast.Query):
            return [synthetic] if any(e == synthetic for _, e in items) else []
        raise KsqlError("Key missing from projection (ie, SELECT). See https://cnfl.io/2LV7ouS.\nThe query used to "
                        f"build `{name}` must include the join expression ROWKEY in its projection (eg, SELECT "
                        "ROWKEY...).\nROWKEY was added as a synthetic key column because the join criteria did not "
                        "match any source column. This expression must be included in the projection and may be "
                        "aliased. ", statement=text)
    join = joins[0][0]
    assert isinstance(join.on, ast.Binary)
    pk = src.key_columns[0].name
    on_left = [c for c in (join.on.left, join.on.right) if isinstance(c, ast.Column)
               and (c.source == left or (c.source is None and src.column(c.name) is not None))]
    projected: list[ast.Expr] = [e for _, e in items if isinstance(e, ast.Column) and e.name == pk and e.source in (None, left)
                 and (e.source == left or src.column(e.name) is not None)]
    if on_left and on_left[0].name != pk:                 # a foreign-key join: keyed by the left table
        if projected or isinstance(s, ast.Query):
            return projected[:1]
        raise KsqlError(f"Primary key column missing in projection. For foreign-key table-table joins, the "
                        f"projection must include all primary key columns from the left input table ({left}). "
                        f"Missing column: `{pk}`.", statement=text)
    viable = [ast.Column(pk, left)] + [ast.Column(d.key_columns[0].name, a) for j, d, a in joins]
    for _, e in items:
        if isinstance(e, ast.Column) and any(e.name == v.name and e.source in (None, v.source) for v in viable):
            return [e]
    if isinstance(s, ast.Query):
        return []
    raise KsqlError(f"Key missing from projection (ie, SELECT). See https://cnfl.io/2LV7ouS.\nThe query used to "
                    f"build `{name}` must include the join expressions "
                    f"{_or_list([f'{v.source}.{v.name}' for v in viable])} in its projection (eg, SELECT "
                    f"{viable[0].source}.{viable[0].name}...).", statement=text)


def _star_columns(src: DataSource, s: Any) -> list[ast.ColumnDef]:
    """``SELECT *``'s columns: a push query over a windowed source has WINDOWSTART and WINDOWEND
    after the keys (ksqlDB's ``withPseudoAndKeyColsInValue``); a persistent query keeps them in
    its output's key, not as columns (``FinalProjectNode``)."""
    if src.window is None or not isinstance(s, ast.Query):
        return list(src.columns)
    bounds = [ast.ColumnDef(b, ast.SqlType("BIGINT")) for b in WINDOW_BOUNDS]
    return list(src.key_columns) + bounds + list(src.value_columns)


def _kept_window(src: DataSource, aggregate: bool, joins: list[Any]) -> ast.Window | None:
    """A windowed stream's window carried to a projection's or a stream-stream join's output,
    whose keys stay windowed (as ksqlDB's do: the left source's window); an aggregate's GROUP BY
    rekeys the rows, dropping it. (A join with a windowed table is a push query only.)"""
    if aggregate or (joins and any(d.kind != "STREAM" for _, d, _ in joins)):
        return None
    return src.window


def _columns_in_scope(src: DataSource) -> frozenset[str]:
    """A joined source's columns as a query names them: its own, the pseudo columns, and a
    windowed source's WINDOWSTART/WINDOWEND."""
    return frozenset(c.name for c in src.columns) | set(PSEUDO) | (set(WINDOW_BOUNDS) if src.window else set())


def _qualified(e: ast.Expr, scope: "set[str] | Scope") -> ast.Column:
    assert isinstance(e, ast.Column)
    if e.source is not None or not isinstance(scope, Scope):
        return e
    owner = next((a for a, cols in scope.sources if e.name in cols), None)
    return ast.Column(e.name, owner)


def _expr_text(e: ast.Expr) -> str:
    if isinstance(e, ast.Column):
        return f"{e.source}.{e.name}" if e.source else e.name
    if isinstance(e, ast.Binary):
        return f"({_expr_text(e.left)} {e.op} {_expr_text(e.right)})"
    if isinstance(e, ast.Literal):
        return repr(e.value)
    return type(e).__name__.upper()


def _check_insert_schema(result: list[tuple[str, bool, ast.SqlType | None]], sink: DataSource, text: str) -> None:
    """ksqlDB's rule for INSERT INTO: the query's columns (names, key or value, and types where
    they are known before Spark runs) are the sink stream's, in the same order."""
    ordered = [c for c in result if c[1]] + [c for c in result if not c[1]]
    same = len(ordered) == len(sink.columns) and all(
        n == c.name and k == c.key and (t is None or t == c.type) for (n, k, t), c in zip(ordered, sink.columns))
    if not same:
        def show(cols: list[tuple[str, bool, ast.SqlType | None]]) -> str:
            return ", ".join(f"`{n}` {t or '?'}{' KEY' if k else ''}" for n, k, t in cols)
        raise KsqlError(f"Incompatible schema between results and sink.\nResult schema is {show(ordered)}\n"
                        f"Sink schema is {show([(c.name, c.key, c.type) for c in sink.columns])}", statement=text)


def _check_read_only(s: ast.CreateSource | ast.CreateAsSelect, existing: DataSource | None, text: str) -> None:
    """ksqlDB's refusals around SOURCE streams and tables: no CREATE OR REPLACE of one or into
    one (``CreateSourceFactory``), no CREATE ... AS SELECT writing into one (``EngineExecutor``)."""
    kind = s.kind.lower()
    existing_read_only = existing is not None and existing.read_only
    if isinstance(s, ast.CreateSource) and s.or_replace and (s.read_only or existing_read_only):
        raise KsqlError(f"Cannot add {kind} '{s.name}': CREATE OR REPLACE is not supported on source {kind}s.",
                        statement=text)
    if isinstance(s, ast.CreateAsSelect) and s.or_replace and existing is not None and existing_read_only:
        raise KsqlError(f"Cannot insert into read-only {existing.kind.lower()}: {existing.name}", statement=text)


def _command_id(s: ast.Statement) -> str:
    if isinstance(s, (ast.CreateSource, ast.CreateAsSelect)):
        return f"{s.kind.lower()}/`{s.name}`/create"
    if isinstance(s, ast.InsertInto):
        return f"stream/`{s.target}`/create"
    if isinstance(s, ast.Drop):
        return f"{s.kind.lower()}/`{s.name}`/drop"
    if isinstance(s, ast.Terminate):
        return f"terminate/`{s.query_id or 'ALL'}`/execute"
    return "unknown/`?`/execute"


def _status(text: str, s: ast.Statement, seq: int, message: str) -> Entity:
    return {"@type": "currentStatus", "statementText": text, "commandId": _command_id(s),
            "commandStatus": {"status": "SUCCESS", "message": message, "queryId": None},
            "commandSequenceNumber": seq, "warnings": []}


__all__ = ["BAD_STATEMENT", "Engine", "Entity", "QueryPlan"]
