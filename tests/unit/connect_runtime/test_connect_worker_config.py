"""Worker and connector properties: Kafka's names, defaults and messages; client settings by
prefix; the CLI's one-line errors."""
from __future__ import annotations

from pathlib import Path

import pytest

from kafkalite.connect.errors import ConfigException
from kafkalite.connect.runtime.connector_config import ConnectorConfig, validate_sink_topics
from kafkalite.connect.runtime.main import main
from kafkalite.connect.runtime.worker import KafkaWorkerClients, _kwargs_for
from kafkalite.connect.runtime.worker_config import WorkerConfig, WorkerConfigError
from kafkalite.client import Consumer

BASE = {"key.converter": "StringConverter", "value.converter": "JsonConverter"}


def test_distributed_defaults_and_required_properties() -> None:
    cfg = WorkerConfig.parse({**BASE, "group.id": "g", "config.storage.topic": "c", "offset.storage.topic": "o",
                              "status.storage.topic": "s", "rest.advertised.host.name": "w1",
                              "listeners": "http://0.0.0.0:18083"}, distributed=True)
    assert (cfg.connect_protocol, cfg.scheduled_rebalance_max_delay_ms, cfg.offset_partitions,
            cfg.status_partitions, cfg.config_replication_factor) == ("sessioned", 300000, 25, 5, 3)
    assert cfg.advertised_url == "http://w1:18083"
    with pytest.raises(WorkerConfigError, match='Missing required configuration "group.id"'):
        WorkerConfig.parse(BASE, distributed=True)
    with pytest.raises(WorkerConfigError, match="connect.protocol"):
        WorkerConfig.parse({**BASE, "group.id": "g", "config.storage.topic": "c", "offset.storage.topic": "o",
                            "status.storage.topic": "s", "connect.protocol": "fast"}, distributed=True)
    with pytest.raises(WorkerConfigError, match="offset.storage.file.filename"):
        WorkerConfig.parse(BASE, distributed=False)
    with pytest.raises(WorkerConfigError, match="value.converter"):
        WorkerConfig.parse({"key.converter": "x", "offset.storage.file.filename": "f"}, distributed=False)
    with pytest.raises(WorkerConfigError, match="offset.flush.interval.ms"):
        WorkerConfig.parse({**BASE, "offset.storage.file.filename": "f", "offset.flush.interval.ms": "soon"},
                           distributed=False)


def test_client_settings_security_then_prefixes_and_converter_settings() -> None:
    cfg = WorkerConfig.parse({**BASE, "offset.storage.file.filename": "f", "bootstrap.servers": "b:1",
                              "security.protocol": "SASL_PLAINTEXT", "sasl.mechanism": "PLAIN",
                              "sasl.username": "u", "sasl.password": "p",
                              "consumer.max.poll.records": "7", "consumer.sasl.username": "cu",
                              "value.converter.schemas.enable": "false", "rest.port": "9999"},
                             distributed=False)
    consumer = cfg.client_props("consumer.")
    assert consumer["bootstrap.servers"] == "b:1" and consumer["max.poll.records"] == "7"
    assert consumer["sasl.username"] == "cu" and cfg.client_props("producer.")["sasl.username"] == "u"
    assert cfg.client_security("consumer.").sasl and cfg.client_security("consumer.").username == "cu"
    assert cfg.converter_config("value.converter") == ("JsonConverter", {"schemas.enable": "false"})
    assert cfg.listeners[0].port == 9999
    kwargs = _kwargs_for(Consumer.__init__, {"max.poll.records": "7", "auto.offset.reset": "earliest",
                                             "unknown.setting": "x"})
    assert kwargs == {"max_poll_records": 7, "auto_offset_reset": "earliest"}
    assert isinstance(KafkaWorkerClients(cfg), KafkaWorkerClients)


def test_connector_config_messages() -> None:
    with pytest.raises(ConfigException, match="connector.class"):
        ConnectorConfig.parse({"name": "x"})
    with pytest.raises(ConfigException, match="Invalid value 0 for configuration tasks.max"):
        ConnectorConfig.parse({"connector.class": "c", "tasks.max": "0"})
    both = ConnectorConfig.parse({"connector.class": "c", "topics": "a", "topics.regex": "a.*"})
    with pytest.raises(ConfigException, match="mutually exclusive"):
        validate_sink_topics(both)
    dlq = ConnectorConfig.parse({"connector.class": "c", "topics": "a,b",
                                 "errors.deadletterqueue.topic.name": "b"})
    with pytest.raises(ConfigException, match="DLQ topic cannot be one of the topics"):
        validate_sink_topics(dlq)
    with pytest.raises(ConfigException, match="errors.tolerance"):
        ConnectorConfig.parse({"connector.class": "c", "errors.tolerance": "some"})


def test_cli_bad_files_are_one_line_errors(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert main([str(tmp_path / "missing.properties")]) == 2
    assert "cannot read" in capsys.readouterr().err
    worker = tmp_path / "w.properties"
    worker.write_text("key.converter=StringConverter\n")
    assert main([str(worker)]) == 2
    err = capsys.readouterr().err.strip()
    assert err.startswith("kafkalite-connect-standalone: ") and "\n" not in err
    assert main([str(worker)], distributed=True) == 2
    assert "kafkalite-connect-distributed" in capsys.readouterr().err
