"""The worker's Prometheus metrics, named after Kafka's Connect MBeans as the JMX exporter renders
them (``kafka_connect_source_task_metrics_source_record_poll_total`` ...), labelled by connector
and task. One registry per worker, served at ``/metrics`` on the REST listener.
"""
from __future__ import annotations

from prometheus_client import CollectorRegistry, Counter, Histogram
from prometheus_client.exposition import CONTENT_TYPE_LATEST, generate_latest

__all__ = ["ConnectMetrics", "CONTENT_TYPE_LATEST"]

_LABELS = ("connector", "task")


class ConnectMetrics:
    def __init__(self) -> None:
        self.registry = CollectorRegistry(auto_describe=True)
        r = self.registry
        self.source_polled = Counter("kafka_connect_source_task_metrics_source_record_poll",
                                     "Records polled from source tasks", _LABELS, registry=r)
        self.source_written = Counter("kafka_connect_source_task_metrics_source_record_write",
                                      "Records written to Kafka by source tasks", _LABELS, registry=r)
        self.sink_read = Counter("kafka_connect_sink_task_metrics_sink_record_read",
                                 "Records read from Kafka by sink tasks", _LABELS, registry=r)
        self.sink_sent = Counter("kafka_connect_sink_task_metrics_sink_record_send",
                                 "Records handed to sink tasks' put", _LABELS, registry=r)
        self.commit_latency = Histogram("kafka_connect_connector_task_metrics_offset_commit_seconds",
                                        "Offset commit latency", _LABELS, registry=r,
                                        buckets=(0.005, 0.01, 0.05, 0.1, 0.5, 1, 5, 30))
        self.commit_failures = Counter("kafka_connect_connector_task_metrics_offset_commit_failure",
                                       "Failed offset commits", _LABELS, registry=r)
        self.record_errors = Counter("kafka_connect_task_error_metrics_total_record_errors",
                                     "Records that failed in a stage", _LABELS, registry=r)
        self.retries = Counter("kafka_connect_task_error_metrics_total_retries",
                               "Retried operations", _LABELS, registry=r)
        self.dead_lettered = Counter("kafka_connect_task_error_metrics_deadletterqueue_produce_requests",
                                     "Records written to the dead-letter topic", _LABELS, registry=r)

    def render(self) -> bytes:
        return generate_latest(self.registry)
