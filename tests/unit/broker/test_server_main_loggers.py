"""``kafkalite-server --logger NAME=LEVEL``: one logger's level, as a log4j.properties line sets it."""
from __future__ import annotations

import logging
from pathlib import Path

import pytest

from kafkalite.broker import main

pytestmark = pytest.mark.unit


def test_a_malformed_logger_option_is_one_line_and_exit_code_1(tmp_path: Path,
                                                              capsys: pytest.CaptureFixture[str]) -> None:
    props = tmp_path / "server.properties"
    props.write_text("broker.id=1\nzookeeper.connect=127.0.0.1:1\nlog.dirs=%s\n" % (tmp_path / "data"))
    for bad in ("kafka.request.logger", "kafka.request.logger=LOUD", "=DEBUG"):
        assert main.main([str(props), "--logger", bad]) == 1
        err = capsys.readouterr().err
        assert err.count("\n") == 1 and "--logger takes NAME=LEVEL" in err and repr(bad) in err


def test_setup_logging_sets_each_named_logger() -> None:
    name = "kafkalite.test.one-logger"
    before = logging.getLogger(name).level
    try:
        main.setup_logging("INFO", main.logger_levels([f"{name}=debug"]))
        assert logging.getLogger(name).level == logging.DEBUG
        assert logging.getLogger("kafka.request.logger").level == logging.NOTSET
    finally:
        logging.getLogger(name).setLevel(before)
