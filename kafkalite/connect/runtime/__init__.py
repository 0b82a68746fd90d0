"""Kafka Connect's runtime: worker configuration, the Worker and its task loops, error handling
(retries, dead-letter topics), the herders (standalone and distributed) and the REST API.

The worker is a client of the brokers: it reaches them only through :mod:`kafkalite.client`.
Modules follow Kafka's ``connect/runtime`` seams: ``worker_config`` (worker properties),
``connector_config`` (a connector's properties), ``errors`` (RetryWithToleranceOperator and the
reporters), ``worker`` (the Worker and WorkerConnector), ``worker_task`` / ``source_task`` /
``sink_task`` (WorkerTask, WorkerSourceTask, WorkerSinkTask), ``offsets`` (offset stores),
``status`` (connector and task states), ``standalone`` and ``distributed`` (the herders),
``protocol`` (Connect's group protocol bytes), ``config_store`` / ``kafka_stores`` (the config,
offset and status topics), ``rest`` (the HTTP layer over a herder).
"""
