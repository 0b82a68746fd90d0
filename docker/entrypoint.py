#!/usr/bin/env python3
"""Container entrypoint: render server.properties from the environment, then exec the command.

Every ``KAFKALITE_CFG_<NAME>`` or ``KAFKA_CFG_<NAME>`` variable becomes one property, named the
usual container way: lower case, ``_`` -> ``.``, ``__`` -> ``_``, ``___`` -> ``-``. So
``KAFKA_CFG_BROKER_ID=101`` gives ``broker.id=101`` and ``KAFKA_CFG_ZOOKEEPER_CONNECT`` gives
``zookeeper.connect``. ``KAFKALITE_CFG_*`` wins over ``KAFKA_CFG_*`` for the same property.
The result is validated with the broker's own configuration table, so a typo stops the
container with one line naming the property instead of a broker that ignores it.

``KAFKALITE_CONFIG`` (default ``/etc/kafkalite/server.properties``) is where the file goes; a
command given to the container runs instead of ``kafkalite-server <file>`` (e.g. a shell).
"""
from __future__ import annotations

import os
import sys
from typing import Mapping

PREFIXES = ("KAFKA_CFG_", "KAFKALITE_CFG_")      # later prefix wins
DEFAULT_PATH = "/etc/kafkalite/server.properties"


def env_to_property(suffix: str) -> str:
    """``LOG_RETENTION_MS`` -> ``log.retention.ms`` (``__`` keeps an underscore, ``___`` a dash)."""
    return (suffix.lower().replace("___", "\0dash\0").replace("__", "\0us\0").replace("_", ".")
            .replace("\0dash\0", "-").replace("\0us\0", "_"))


def properties_from_env(env: Mapping[str, str]) -> dict[str, str]:
    props: dict[str, str] = {}
    for prefix in PREFIXES:
        for key in sorted(env):
            if key.startswith(prefix) and len(key) > len(prefix):
                props[env_to_property(key[len(prefix):])] = env[key]
    return props


def render(props: Mapping[str, str]) -> str:
    lines = ["# rendered from KAFKA_CFG_* / KAFKALITE_CFG_* by docker/entrypoint.py"]
    lines += [f"{k}={v}" for k, v in sorted(props.items())]
    return "\n".join(lines) + "\n"


def main(argv: list[str], env: Mapping[str, str] = os.environ) -> int:
    from kafkalite.config import BrokerConfig, ConfigError

    path = env.get("KAFKALITE_CONFIG", DEFAULT_PATH)
    props = properties_from_env(env)
    try:
        BrokerConfig.from_properties(props)
    except ConfigError as exc:
        print(f"kafkalite entrypoint: {exc} (from the KAFKA_CFG_*/KAFKALITE_CFG_* environment)", file=sys.stderr)
        return 1
    os.makedirs(os.path.dirname(path) or ".", exist_ok=True)
    with open(path, "w") as f:
        f.write(render(props))
    cmd = argv or ["kafkalite-server", path]
    os.execvp(cmd[0], cmd)
    return 127  # not reached


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
