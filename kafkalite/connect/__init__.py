"""Kafka Connect on kafkalite: the connector API, data model, converters, transforms and plugins.

Connect is a CLIENT of the brokers (layer 3, like the schema registry): the runtime reaches them
only over the wire. This package keeps Kafka's seams (org.apache.kafka.connect.*): ``data`` is the
schema/value model, ``records`` the records tasks exchange, ``connector`` the plugin API,
``converters`` the byte <-> data mapping, ``transforms`` the single message transforms, ``plugins``
how configured class names resolve.
"""
from __future__ import annotations

from importlib import metadata as _metadata

try:
    #: The version plugins report (GET /connector-plugins): kafkalite's own.
    __version__: str = _metadata.version("kafkalite")
except _metadata.PackageNotFoundError:  # a source tree that is not installed
    __version__ = "0.1.0"
