"""The Spark reader's pure parts, without a JVM or a broker: options, planning, Arrow conversion.

The converter is checked against the project's record decoder (the oracle) on batches built with
:mod:`kafkalite.records`, including compression, headers, null keys/values, LogAppendTime,
control batches, range cuts, cut-off tails and corruption.
"""
from __future__ import annotations

import pickle
import random

import pyarrow as pa
import pytest
from pyspark.sql.datasource import CaseInsensitiveDict

from kafkalite.errors import CorruptRecordError
from kafkalite.records import Codec, build_batch, build_end_txn_marker, iter_records
from kafkalite.records.batch import assign_offsets, scan_valid_prefix
from kafkalite.records.control import ControlType
from spark_integration.arrow_records import arrow_schema, convert
from spark_integration.broker_io import ReadSettings
from spark_integration.options import OffsetSpec, parse_options
from spark_integration.planning import (
    DataLossError, PlannedRange, apply_committed, offsets_from_json, offsets_json, plan_ranges, rate_limit,
    resolve_spec, select_partitions, split_ranges,
)
from spark_integration.source import KafkaliteDataSource, KafkaliteStreamReader, OffsetRange

BS = {"kafka.bootstrap.servers": "127.0.0.1:1"}


# --- options ------------------------------------------------------------------------------------

@pytest.mark.parametrize("options, message", [
    ({"subscribe": "t"}, "Option 'kafka.bootstrap.servers' must be specified"),
    ({**BS}, "One of the following options must be specified for Kafka source: assign, subscribe, "
             "subscribePattern"),
    ({**BS, "subscribe": "a", "assign": '{"a":[0]}'}, "Only one of the following options can be specified"),
    ({**BS, "subscribe": " , "}, "No topics to subscribe to"),
    ({**BS, "subscribePattern": ""}, "Pattern to subscribe is empty"),
    ({**BS, "subscribePattern": "a("}, "Invalid regular expression"),
    ({**BS, "assign": "a,b"}, "No topicpartitions to assign"),
    ({**BS, "assign": '{"a":["x"]}'}, "No topicpartitions to assign"),
    ({**BS, "subscribe": "t", "startingOffsets": "latest"}, "starting offset can't be latest for batch queries"),
    ({**BS, "subscribe": "t", "startingOffsets": '{"t":{"0":-1}}'}, "starting offset can't be latest"),
    ({**BS, "subscribe": "t", "endingOffsets": "earliest"}, "ending offset can't be earliest for batch queries"),
    ({**BS, "subscribe": "t", "startingOffsets": "{bad"}, "Expected e.g."),
    ({**BS, "subscribe": "t", "startingOffsets": '{"t":{"0":-7}}'}, "Invalid value -7 for t-0"),
    ({**BS, "subscribe": "t", "startingOffsets": '{"t":{"0":5}}', "endingOffsets": '{"t":{"0":3}}'},
     "startingOffsets for t-0 (5) is after its endingOffsets (3)"),
    ({**BS, "subscribe": "t", "startingOffsets": '{"t":{"0":1}}', "endingOffsets": '{"t":{"1":3}}'},
     "must name the same topic-partitions"),
    ({**BS, "subscribe": "t", "startingTimestamp": "soon"}, "Expected a single long value"),
    ({**BS, "subscribe": "t", "failOnDataLoss": "maybe"}, "'failOnDataLoss', must be true or false"),
    ({**BS, "subscribe": "t", "minPartitions": "0"}, "'minPartitions', must be a positive integer"),
    ({**BS, "subscribe": "t", "kafka.auto.offset.reset": "earliest"}, "'auto.offset.reset' is not supported"),
    ({**BS, "subscribe": "t", "kafka.value.deserializer": "x"}, "'value.deserializer' is not supported"),
    ({**BS, "subscribe": "t", "kafka.enable.auto.commit": "true"}, "'enable.auto.commit' is not supported"),
    ({**BS, "subscribe": "t", "groupId": " "}, "'groupId' must not be empty"),
])
def test_batch_option_errors_name_the_option(options, message):
    """Each invalid batch option fails with Spark's sentence (or one as specific)."""
    with pytest.raises(ValueError, match=_re(message)):
        parse_options(CaseInsensitiveDict(options))


def test_streaming_rules_differ_from_batch():
    """Streaming allows startingOffsets=latest (its default) and refuses endingOffsets."""
    opts = parse_options({**BS, "subscribe": "t", "maxOffsetsPerTrigger": "10"}, streaming=True)
    assert opts.starting == OffsetSpec("latest") and opts.max_offsets_per_trigger == 10
    with pytest.raises(ValueError, match="endingOffsets option not valid in streaming queries"):
        parse_options({**BS, "subscribe": "t", "endingOffsets": "latest"}, streaming=True)


def test_options_are_case_insensitive_and_typed():
    """Keys in any case; values arrive as strings (pyspark reference P5)."""
    opts = parse_options(CaseInsensitiveDict({"KAFKA.BOOTSTRAP.SERVERS": "h:1", "Assign": '{"b":[1,0],"a":[2]}',
                                              "STARTINGOFFSETS": '{"a":{"2":-2},"b":{"0":5,"1":-2}}',
                                              "includeheaders": "TRUE", "minpartitions": "7"}))
    assert opts.assign == (("a", 2), ("b", 0), ("b", 1))
    assert opts.starting.as_dict() == {("a", 2): -2, ("b", 0): 5, ("b", 1): -2}
    assert opts.include_headers and opts.min_partitions == 7 and opts.bootstrap_servers == "h:1"


def test_schema_validates_at_load_and_data_source_pickles():
    """schema() raises ValueError for bad options (Spark shows it at load()); the source pickles."""
    src = KafkaliteDataSource(CaseInsensitiveDict({**BS}))
    with pytest.raises(ValueError, match="One of the following options"):
        src.schema()
    src = KafkaliteDataSource(CaseInsensitiveDict({**BS, "subscribe": "t", "includeHeaders": "true"}))
    assert [f.name for f in src.schema().fields][-1] == "headers"
    reader = src.reader(src.schema())
    assert pickle.loads(pickle.dumps(reader)).opts == reader.opts
    stream = src.streamReader(src.schema())
    assert pickle.loads(pickle.dumps(stream)).opts.include_headers
    part = OffsetRange("t", 0, 1, 2, ReadSettings.of(reader.opts))
    assert pickle.loads(pickle.dumps(part)) == part


def test_security_options_reach_the_clients(monkeypatch):
    """Spark's kafka.-prefixed security options (any case; JAAS or sasl.username/password) become
    the source's ClientSecurity, travel pickled to the workers in ReadSettings, and key the cached
    worker clients, so two users never share an authenticated connection; bad values fail at load."""
    from kafkalite.client.security import ClientSecurity
    from spark_integration import broker_io

    jaas = ('org.apache.kafka.common.security.scram.ScramLoginModule required '
            'username="alice" password="Secret";')
    opts = parse_options(CaseInsensitiveDict({**BS, "subscribe": "t", "KAFKA.SECURITY.PROTOCOL": "SASL_SSL",
                                              "kafka.sasl.mechanism": "SCRAM-SHA-512", "kafka.sasl.jaas.config": jaas,
                                              "kafka.ssl.ca.location": "/ca.pem"}))
    assert (opts.security.protocol, opts.security.mechanism, opts.security.username, opts.security.password,
            opts.security.ca_location) == ("SASL_SSL", "SCRAM-SHA-512", "alice", "Secret", "/ca.pem")
    bob = parse_options({**BS, "subscribe": "t", "kafka.security.protocol": "SASL_PLAINTEXT",
                         "kafka.sasl.mechanism": "PLAIN", "kafka.sasl.username": "bob",
                         "kafka.sasl.password": "pw"}).security
    assert (bob.protocol, bob.username, bob.password, bob.tls) == ("SASL_PLAINTEXT", "bob", "pw", False)
    assert parse_options({**BS, "subscribe": "t"}).security.protocol == "PLAINTEXT"
    settings = ReadSettings.of(opts)
    assert pickle.loads(pickle.dumps(settings)).security == opts.security
    for bad, message in ((("kafka.security.protocol", "KERBEROS"), "unknown security.protocol 'KERBEROS'"),
                         (("kafka.sasl.mechanism", "GSSAPI"), "unsupported sasl.mechanism 'GSSAPI'")):
        base = {**BS, "subscribe": "t", "kafka.security.protocol": "SASL_SSL", "kafka.sasl.username": "u",
                "kafka.sasl.password": "p", "kafka.sasl.mechanism": "PLAIN"}
        with pytest.raises(ValueError, match=f"Invalid Kafka security options: {message}"):
            parse_options({**base, bad[0]: bad[1]})

    made = []

    class FakeClient:
        def __init__(self, bootstrap, **kwargs):
            made.append(kwargs["security"])

        def close(self):
            pass

    monkeypatch.setattr(broker_io, "KafkaClient", FakeClient)
    monkeypatch.setattr(broker_io, "_clients", {})
    a = broker_io.cached_client("h:1", "c", 1000, opts.security)
    assert broker_io.cached_client("h:1", "c", 1000, opts.security) is a
    b = broker_io.cached_client("h:1", "c", 1000, bob)
    assert b is not a and made == [opts.security, bob]
    assert broker_io.cached_client("h:1", "c", 1000, ClientSecurity()) not in (a, b)
    broker_io.drop_client("h:1", "c", 1000, bob)
    assert broker_io.cached_client("h:1", "c", 1000, bob) is not b


# --- planning -----------------------------------------------------------------------------------

TOPICS = {"trucks": [0, 1, 2], "trucks_raw": [0], "other": [0, 1], "__consumer_offsets": [0, 1]}


def test_strategies_select_partitions():
    """subscribe skips missing topics, subscribePattern searches and hides internal topics."""
    assert select_partitions(parse_options({**BS, "subscribe": "other,nope"}), TOPICS) == [("other", 0), ("other", 1)]
    assert select_partitions(parse_options({**BS, "subscribePattern": "truck"}), TOPICS, ["__consumer_offsets"]) == \
        [("trucks", 0), ("trucks", 1), ("trucks", 2), ("trucks_raw", 0)]
    assert select_partitions(parse_options({**BS, "subscribePattern": "^__"}), TOPICS, ["__consumer_offsets"]) == []
    assert select_partitions(parse_options({**BS, "assign": '{"trucks":[2]}'}), TOPICS) == [("trucks", 2)]
    with pytest.raises(ValueError, match="trucks-7 do not exist"):
        select_partitions(parse_options({**BS, "assign": '{"trucks":[7]}'}), TOPICS)


def test_resolve_specs():
    """earliest/latest/JSON (-2/-1)/timestamps become concrete offsets; JSON must cover the partitions."""
    tps = [("a", 0), ("a", 1)]
    low, high = {("a", 0): 3, ("a", 1): 0}, {("a", 0): 10, ("a", 1): 20}
    assert resolve_spec(OffsetSpec("earliest"), tps, low, high, side="starting") == low
    spec = parse_options({**BS, "subscribe": "a", "startingOffsets": '{"a":{"0":-2,"1":7}}'}).starting
    assert resolve_spec(spec, tps, low, high, side="starting") == {("a", 0): 3, ("a", 1): 7}
    with pytest.raises(ValueError, match="must give every topic-partition read; missing a-1"):
        resolve_spec(OffsetSpec("offsets", (("a", 0, 1),)), tps, low, high, side="starting")
    ts = OffsetSpec("timestamp", timestamp=1000)
    assert resolve_spec(ts, tps, low, high, {("a", 0): 5, ("a", 1): -1}, side="ending") == {("a", 0): 5, ("a", 1): 20}
    with pytest.raises(ValueError, match="No offset matched the timestamp 1000"):
        resolve_spec(ts, tps, low, high, {("a", 0): 5, ("a", 1): -1}, side="starting")
    assert resolve_spec(ts, tps, low, high, {("a", 0): 5, ("a", 1): -1}, side="starting",
                        timestamp_strategy="latest") == {("a", 0): 5, ("a", 1): 20}
    assert apply_committed({("a", 0): 3, ("a", 1): 0}, {("a", 0): 8, ("a", 1): -1}) == {("a", 0): 8, ("a", 1): 0}


def test_plan_ranges_data_loss_and_clamping():
    """A start below the log start or above the latest offset is data loss, named precisely."""
    tps = [("a", 0)]
    with pytest.raises(DataLossError, match=r"Offsets \[2, 5\) of a-0 are no longer available"):
        plan_ranges(tps, {("a", 0): 2}, {("a", 0): 9}, {("a", 0): 5}, {("a", 0): 9}, fail_on_data_loss=True)
    assert plan_ranges(tps, {("a", 0): 2}, {("a", 0): 9}, {("a", 0): 5}, {("a", 0): 9},
                       fail_on_data_loss=False) == [PlannedRange("a", 0, 5, 9)]
    with pytest.raises(DataLossError, match="Start offset 12 of a-0 is beyond its latest offset 9"):
        plan_ranges(tps, {("a", 0): 12}, {("a", 0): 9}, {("a", 0): 0}, {("a", 0): 9}, fail_on_data_loss=True)
    # never past the high watermark
    assert plan_ranges(tps, {("a", 0): 1}, {("a", 0): 50}, {("a", 0): 0}, {("a", 0): 9},
                       fail_on_data_loss=True) == [PlannedRange("a", 0, 1, 9)]


def test_split_ranges_like_spark():
    """minPartitions splits proportionally, covering every offset exactly once."""
    ranges = [PlannedRange("a", 0, 0, 900), PlannedRange("a", 1, 100, 200), PlannedRange("a", 2, 5, 5)]
    assert split_ranges(ranges, None) == ranges[:2]
    parts = split_ranges(ranges, 10)
    assert len([p for p in parts if p.partition == 0]) == 9 and len([p for p in parts if p.partition == 1]) == 1
    for partition, (lo, hi) in ((0, (0, 900)), (1, (100, 200))):
        mine = sorted(p for p in parts if p.partition == partition)
        assert mine[0].start == lo and mine[-1].end == hi
        assert all(a.end == b.start for a, b in zip(mine, mine[1:]))


def test_rate_limit_is_proportional():
    """maxOffsetsPerTrigger: floor of the share, ceil below 1, never past latest."""
    start = {("a", 0): 0, ("a", 1): 0, ("a", 2): 10}
    latest = {("a", 0): 1000, ("a", 1): 2, ("a", 2): 10}
    assert rate_limit(start, latest, 100) == {("a", 0): 99, ("a", 1): 1, ("a", 2): 10}
    assert rate_limit(start, latest, None) == latest
    assert offsets_from_json(offsets_json(latest)) == latest
    assert offsets_json({("a", 1): 2}) == {"a": {"1": 2}}


def test_stream_offsets_with_new_partitions_and_available_now():
    """latestOffset caps at the availableNow snapshot and starts new partitions at earliest."""
    class FakePlanner:
        def partitions(self):
            return [("a", 0), ("a", 1)]

        def earliest_latest(self, tps):
            return {("a", 0): 0, ("a", 1): 4}, {("a", 0): 100, ("a", 1): 10}

    reader = KafkaliteStreamReader(parse_options({**BS, "subscribe": "a"}, streaming=True))
    reader._planner = FakePlanner()
    reader.prepareForTriggerAvailableNow()
    assert reader.target == {"a": {"0": 100, "1": 10}}
    from pyspark.sql.streaming.datasource import ReadAllAvailable, ReadMaxRows
    assert reader.latestOffset({"a": {"0": 50}}, ReadAllAvailable()) == {"a": {"0": 100, "1": 10}}
    assert reader.latestOffset({"a": {"0": 50}}, ReadMaxRows(28)) == {"a": {"0": 75, "1": 7}}


# --- Arrow conversion ---------------------------------------------------------------------------

def _blob(batches: list[bytearray]) -> bytes:
    out = bytearray()
    offset = 0
    for b in batches:
        infos, _ = scan_valid_prefix(b)
        offset = assign_offsets(b, infos, offset, 0)[-1].next_offset
        out += b
    return bytes(out)


def _random_batches(rng: random.Random) -> list[bytearray]:
    batches = []
    for n in range(12):
        recs = []
        for i in range(rng.choice([1, 3, 70, 300])):
            key = None if rng.random() < 0.1 else rng.randbytes(rng.choice([0, 3, 12, 13, 40]))
            value = None if rng.random() < 0.1 else rng.randbytes(rng.choice([0, 1, 12, 100, 300, 20000]))
            headers = [("h", b"v"), ("n", None)] if rng.random() < 0.05 else []
            recs.append((1_700_000_000_000 + rng.randrange(-10**6, 10**9), key, value, headers))
        codec = rng.choice([Codec.NONE, Codec.NONE, Codec.GZIP, Codec.SNAPPY, Codec.LZ4, Codec.ZSTD])
        batches.append(build_batch(recs, compression=codec, log_append_time=1234 if n == 5 else None))
        if n == 7:
            batches.append(build_end_txn_marker(ControlType.COMMIT, producer_id=1, producer_epoch=0,
                                                coordinator_epoch=0, timestamp=1))
    return batches


@pytest.mark.parametrize("include_headers", [False, True])
def test_convert_matches_the_record_decoder(include_headers):
    """Every column equals what iter_records decodes; control batches are skipped."""
    blob = _blob(_random_batches(random.Random(7)))
    expected = list(iter_records(blob))
    batch, next_offset = convert(blob, topic="tp", partition=4, start=0, end=1 << 40, include_headers=include_headers)
    assert batch.schema == arrow_schema(include_headers)
    assert next_offset == scan_valid_prefix(blob)[0][-1].next_offset
    assert batch.column("offset").to_pylist() == [r.offset for r in expected]
    assert batch.column("key").to_pylist() == [r.key for r in expected]
    assert batch.column("value").to_pylist() == [r.value for r in expected]
    assert batch.column("timestamp").cast(pa.int64()).to_pylist() == [r.timestamp * 1000 for r in expected]
    assert set(batch.column("topic").to_pylist()) == {"tp"} and set(batch.column("partition").to_pylist()) == {4}
    lat = [i for i, r in enumerate(expected) if r.timestamp == 1234]
    assert lat and all(batch.column("timestampType")[i].as_py() == 1 for i in lat)
    assert batch.column("timestampType").to_pylist().count(1) == len(lat)
    if include_headers:
        assert batch.column("headers").to_pylist() == [
            [{"key": k, "value": v} for k, v in r.headers] if r.headers else None for r in expected]


def test_convert_cuts_the_range_and_ignores_a_cut_off_tail():
    """Rows outside [start, end) are dropped; a partial last batch is not an error."""
    blob = _blob([build_batch([(i, b"k", b"v%d" % i, []) for i in range(10)]) for _ in range(3)])
    batch, nxt = convert(blob[:-5], topic="t", partition=0, start=4, end=17)
    assert batch.column("offset").to_pylist() == list(range(4, 17)) and nxt == 20
    assert convert(blob[:30], topic="t", partition=0, start=0, end=99) == (None, 0)
    assert convert(blob, topic="t", partition=0, start=30, end=99) == (None, 30)


def test_convert_rejects_corruption():
    """A flipped byte fails the CRC; a batch whose records lie about their lengths is refused."""
    blob = bytearray(_blob([build_batch([(i, b"k", b"value", []) for i in range(5)]) for _ in range(2)]))
    bad = bytearray(blob)
    bad[80] ^= 0xFF
    with pytest.raises(CorruptRecordError):
        convert(bytes(bad), topic="t", partition=0, start=0, end=99)


def _re(text: str) -> str:
    import re
    return re.escape(text)


def test_convert_short_fields_at_the_end_of_the_buffer():
    """Keys/values starting in the buffer's last 12 bytes (the strided window's edge) are exact."""
    for value in (b"", b"a", b"abcdefghijk", None):
        blob = _blob([build_batch([(5, None, b"x" * 30, []), (6, b"kk", value, [])])])
        batch, _ = convert(blob, topic="t", partition=0, start=0, end=9)
        assert batch.column("key").to_pylist() == [None, b"kk"]
        assert batch.column("value").to_pylist() == [b"x" * 30, value]


def test_convert_reads_v0_v1_entries_of_a_topic_on_an_older_message_format():
    """A topic altered to message.format.version 0.10.0 answers v1 messages after its v2 batches
    (records/legacy.py): the rows come out with their offsets and values, as for v2 data."""
    from kafkalite.records.batch import mark_stored_magic, read_header
    from kafkalite.records.legacy import convert_for_reader

    v2 = build_batch([(1000 + i, None, b"v%d" % i, ()) for i in range(3)])
    v1 = build_batch([(1003 + i, None, b"v%d" % (3 + i), ()) for i in range(3)])
    assign_offsets(v1, [read_header(v1)], 3, 0)
    mark_stored_magic(v1, read_header(v1), 1)
    blob = bytes(convert_for_reader(bytes(v2 + v1), 2))
    batch, nxt = convert(blob, topic="t", partition=0, start=1, end=100)
    assert nxt == 6
    assert batch.column("offset").to_pylist() == [1, 2, 3, 4, 5]
    assert batch.column("value").to_pylist() == [b"v%d" % i for i in range(1, 6)]
