"""Kafka 2.8's single message transforms and predicates (org.apache.kafka.connect.transforms).

One module per transform; ``chain`` turns a connector's ``transforms``/``predicates``
configuration into the TransformationChain the runtime applies to every record.
"""
from .base import KeyOrValueTransformation, Predicate, Transformation
from .chain import TransformationChain, enrich, transforms_config_def

__all__ = ["Transformation", "Predicate", "KeyOrValueTransformation", "TransformationChain", "enrich",
           "transforms_config_def"]
