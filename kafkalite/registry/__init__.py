"""A schema registry speaking Confluent Schema Registry's REST API, its state in a kafkalite topic.

Pure parts (no I/O): :mod:`.schemas` (AVRO and JSON Schema parsing, canonical identity),
:mod:`.compatibility` (the levels and checks), :mod:`.records` (``_schemas`` key/value formats),
:mod:`.state` (state built by replaying records), :mod:`.operations` (what each request means:
answers, and records to write). Around them: :mod:`.service` (one write at a time on the primary,
answered once replayed), :mod:`.rest` (Twisted Web), :mod:`.forwarding` (non-primary -> primary),
:mod:`.kafkastore` (``_schemas`` through :mod:`kafkalite.client`), :mod:`.election` (the primary,
by the Kafka group protocol), :mod:`.config` and :mod:`.main` (``kafkalite-schema-registry``).
The registry reaches brokers only over the wire, like the other tools.

Schema types: AVRO (default) and JSON. PROTOBUF is not supported: it needs a .proto parser and
Protobuf's compatibility rules, and no well-kept Python library offers both.
"""
