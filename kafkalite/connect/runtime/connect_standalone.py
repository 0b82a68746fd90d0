"""``python -m kafkalite.connect.runtime.connect_standalone`` = ``kafkalite-connect-standalone``."""
from .main import standalone_console

if __name__ == "__main__":
    standalone_console()
