"""``python -m kafkalite.console``: the same as the ``kafkalite-console`` entry point."""
from kafkalite.console.main import console

console()
