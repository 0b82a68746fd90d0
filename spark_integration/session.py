"""A SparkSession whose Python workers run this interpreter and import this project, locally or
on a Spark cluster, with the ``kafkalite`` source and sink registered.

In ``local[*]`` the Python workers are children of the driver and inherit its environment
(``PYSPARK_PYTHON``, ``PYTHONPATH``). On a cluster (``spark://``, ``yarn``, ``k8s://``) they are
children of executors started by the cluster's workers, which do not see the driver's
environment: the interpreter goes to them as ``spark.pyspark.python`` and the import path as
``spark.executorEnv.PYTHONPATH`` (both overridable through ``conf``). The interpreter's path must
exist on every worker machine (the same venv path), and the project be importable there: this
tree's path (a shared file system or the same checkout), or the package installed.
"""
from __future__ import annotations

import os
import sys
from pathlib import Path
from typing import Any, Mapping

ROOT = Path(__file__).resolve().parents[1]

#: The driver JVM's default thread stack (``-Xss``), set through ``spark.driver.defaultJavaOptions``
#: (which a user's ``spark.driver.extraJavaOptions`` adds to rather than replaces). When a query
#: whose ``foreachBatch`` function is inside a py4j call is stopped, the call fails with
#: ``InterruptedException`` and Spark tells that from a failure by matching the whole Python
#: traceback against ``Py4JJavaError: An error occurred while calling((.|\r\n|\r|\n)*)(...)``
#: (StreamExecution.isInterruptionException): ``java.util.regex`` recurses once per character
#: there, so on the JVM's default 1 MB thread stack a traceback over ~2,000 characters (every real
#: one: it carries the Java stack) ends the stream thread with ``java.lang.StackOverflowError``
#: instead of a clean stop. 16 MB holds tracebacks of 64,000 characters; it is address space
#: reserved per thread, touched only as deep as a thread goes.
DRIVER_JAVA_OPTIONS = "-Xss16m"


def is_local(master: str) -> bool:
    return master == "local" or master.startswith("local[")


def python_path() -> str:
    """This project's root first, then whatever PYTHONPATH the driver has."""
    parts = [str(ROOT), *os.environ.get("PYTHONPATH", "").split(os.pathsep)]
    return os.pathsep.join(dict.fromkeys(p for p in parts if p))


def session_conf(master: str, conf: Mapping[str, str] | None = None) -> dict[str, str]:
    """The settings :func:`spark_session` adds for ``master``, under the caller's own ``conf``
    (``spark.driver.defaultJavaOptions`` only takes effect if this process starts the JVM)."""
    out = {"spark.ui.showConsoleProgress": "false", "spark.sql.session.timeZone": "UTC",
           "spark.driver.defaultJavaOptions": DRIVER_JAVA_OPTIONS}
    if not is_local(master):
        out["spark.pyspark.python"] = os.environ.get("PYSPARK_PYTHON", sys.executable)
        out["spark.executorEnv.PYTHONPATH"] = python_path()
    return {**out, **(conf or {})}


def spark_session(app_name: str, master: str = "local[2]", conf: Mapping[str, str] | None = None) -> Any:
    """``SparkSession.builder.master(master)...getOrCreate()`` with :func:`session_conf` and the
    data source registered; sets ``PYSPARK_PYTHON``/``PYTHONPATH`` for local Python workers."""
    os.environ.setdefault("PYSPARK_PYTHON", sys.executable)
    os.environ["PYTHONPATH"] = python_path()
    from pyspark.sql import SparkSession

    from spark_integration import register

    builder = SparkSession.builder.appName(app_name).master(master)
    for key, value in session_conf(master, conf).items():
        builder = builder.config(key, value)
    session = builder.getOrCreate()
    register(session)
    return session
