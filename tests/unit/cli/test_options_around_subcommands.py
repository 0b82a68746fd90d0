"""Global options go before or after the subcommand (issue 28): ``kafkalite-cluster up --data-dir D``
and ``kafkalite-cluster --data-dir D up``, ``kafkalite-transactions list --bootstrap-server B``.

One mechanism (``kafkalite.cli.common.SharedOptions``) serves every tool with subcommands; these
tests parse the real tools' command lines (no process, no cluster).
"""
from __future__ import annotations

import argparse

import pytest

from kafkalite.cli import transactions
from kafkalite.cluster import cli as cluster_cli

CLUSTER_SUBCOMMANDS = [["up"], ["status"], ["kill", "102"], ["start", "102"], ["add-broker"],
                       ["decommission", "102"], ["rolling-restart"], ["down"]]


def _cluster(argv: list[str]) -> argparse.Namespace:
    return cluster_cli.parse_args(argv)


@pytest.mark.parametrize("cmd", CLUSTER_SUBCOMMANDS, ids=lambda c: c[0])
def test_cluster_data_dir_before_or_after_every_subcommand(cmd: list[str]) -> None:
    assert _cluster(["--data-dir", "/d/before", *cmd]).data_dir == "/d/before"
    assert _cluster([*cmd, "--data-dir", "/d/after"]).data_dir == "/d/after"
    # neither: the default, not a missing attribute
    assert _cluster(cmd).data_dir == cluster_cli.DEFAULT_DIR


def test_cluster_subcommand_options_still_parse_next_to_the_global_one() -> None:
    a = _cluster(["up", "--brokers", "1", "--data-dir", "/d", "--override", "x=1"])
    assert (a.command, a.brokers, a.data_dir, a.override) == ("up", 1, "/d", ["x=1"])
    # given twice, the later one wins (as any repeated option does)
    assert _cluster(["--data-dir", "/first", "down", "--data-dir", "/second"]).data_dir == "/second"


def test_cluster_help_of_a_subcommand_shows_the_global_option(capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit):
        _cluster(["up", "--help"])
    assert "--data-dir" in capsys.readouterr().out


def test_cluster_main_uses_the_data_dir_given_after_the_subcommand(tmp_path, capsys) -> None:
    # `down` on a directory without a cluster: answers from that very directory
    assert cluster_cli.main(["down", "--data-dir", str(tmp_path / "nothing-here")]) == 0
    assert str(tmp_path / "nothing-here") in capsys.readouterr().out


def _txn(argv: list[str]) -> argparse.Namespace:
    return transactions.parse_args(argv)


@pytest.mark.parametrize("cmd", [["list"], ["describe", "--transactional-id", "t"],
                                 ["describe-producers", "--topic", "a", "--partition", "0"]], ids=lambda c: c[0])
def test_transactions_global_options_before_or_after(cmd: list[str]) -> None:
    before = _txn(["--bootstrap-server", "h:1", "--command-config", "c.properties", "--verbose", *cmd])
    after = _txn([*cmd, "--bootstrap-server", "h:1", "--command-config", "c.properties", "--verbose"])
    for a in (before, after):
        assert (a.bootstrap_server, a.command_config, a.verbose) == ("h:1", "c.properties", True)
    assert _txn(["--bootstrap-server", "h:1", *cmd]).verbose is False


def test_transactions_bootstrap_server_is_still_required(capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit) as exc:
        _txn(["list"])
    assert exc.value.code == 1
    assert "--bootstrap-server" in capsys.readouterr().err


def test_shared_options_keep_a_value_given_before_the_subcommand() -> None:
    """The mechanism itself: a subparser's default would overwrite the main parser's value."""
    from kafkalite.cli.common import SharedOptions
    shared = SharedOptions(lambda p: p.add_argument("--level", type=int, default=7))
    main = argparse.ArgumentParser()
    sub = shared.subcommands(main, dest="cmd", required=True)
    sub.add_parser("a").add_argument("--x", default="x")
    assert shared.parse_args(main, ["--level", "1", "a"]).level == 1
    assert shared.parse_args(main, ["a", "--level", "2"]).level == 2
    assert vars(shared.parse_args(main, ["a"])) == {"level": 7, "cmd": "a", "x": "x"}
