"""Client quotas as Kafka 2.x (KIP-13, KIP-55, KIP-124, KIP-219), pure: no reactor, no ZooKeeper.

* :class:`Rate` is Kafka's windowed rate (``org.apache.kafka.common.metrics.stats.Rate`` over a
  ``SampledStat``): ``quota.window.num`` samples of ``quota.window.size.seconds`` each; the rate is
  the samples' total over the elapsed window, which counts at least ``samples - 1`` full windows
  so a new client's first burst is not measured over a few milliseconds.
* :class:`QuotaEntities` holds the ``/config/users/..`` and ``/config/clients/..`` overrides and
  resolves the quota that applies to a (user, client-id) with Kafka's precedence (most specific
  first, ``<default>`` after the named entity at each level).
* :class:`ClientQuotaManager` keeps one rate per quota entity (Kafka's sensor, keyed by the matched
  entity's tags: clients sharing a named entity share the quota; a ``<default>`` gives each client
  its own) and answers "how long must this client be throttled" for one quota type.

The throttle time is Kafka's: ``(rate - quota) / quota * window_size_ms`` after recording the
value, i.e. how long the client must stay silent for its rate over the window to fall back to the
quota.
"""
from kafkalite.quota.core import (CONSUMER_BYTE_RATE, DEFAULT, PRODUCER_BYTE_RATE, QUOTA_KEYS, REQUEST_PERCENTAGE,
                                  ClientQuotaManager, QuotaEntities, QuotaEntity, Rate, RateConfig)

__all__ = ["CONSUMER_BYTE_RATE", "DEFAULT", "PRODUCER_BYTE_RATE", "QUOTA_KEYS", "REQUEST_PERCENTAGE",
           "ClientQuotaManager", "QuotaEntities", "QuotaEntity", "Rate", "RateConfig"]
