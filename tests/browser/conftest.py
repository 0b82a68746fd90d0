"""The browser tier: the web console as a real process (``python -m kafkalite.console``, the
launcher's ConsoleProcess) driven in Debian's headless Chromium through Selenium and the system
chromedriver (/usr/bin/chromedriver: nothing is downloaded)."""
from __future__ import annotations

import shutil
from pathlib import Path
from typing import Any, Callable, Iterator

import pytest

from kafkalite.cluster.processes import ConsoleProcess

CHROMEDRIVER = "/usr/bin/chromedriver"


@pytest.fixture
def driver() -> Iterator[Any]:
    if not Path(CHROMEDRIVER).exists() or not (shutil.which("chromium") or shutil.which("chromium-browser")):
        pytest.fail("chromium and chromium-driver are not installed (scripts/setup installs them)")
    from selenium import webdriver
    from selenium.webdriver.chrome.service import Service
    options = webdriver.ChromeOptions()
    for arg in ("--headless=new", "--no-sandbox", "--disable-dev-shm-usage", "--disable-gpu",
                "--window-size=1280,900", "--disable-extensions"):
        options.add_argument(arg)
    options.binary_location = shutil.which("chromium") or shutil.which("chromium-browser") or ""
    d = webdriver.Chrome(service=Service(CHROMEDRIVER), options=options)
    d.set_page_load_timeout(60)
    try:
        yield d
    finally:
        d.quit()


@pytest.fixture
def console_factory(tmp_path: Path) -> Iterator[Callable[..., ConsoleProcess]]:
    """``make(bootstrap, **kw)``: a console process (ConsoleProcess's keywords), ready; stopped after."""
    made: list[ConsoleProcess] = []

    def make(bootstrap: str, **kw: Any) -> ConsoleProcess:
        c = ConsoleProcess(tmp_path, bootstrap, name=f"console-{len(made)}", **kw)
        made.append(c)
        c.launch()
        c.wait_ready(60)
        return c

    yield make
    for c in made:
        if c.alive:
            c.terminate()
            if not c.wait(10):
                c.kill()
