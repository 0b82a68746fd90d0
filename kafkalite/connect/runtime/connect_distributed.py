"""``python -m kafkalite.connect.runtime.connect_distributed`` = ``kafkalite-connect-distributed``."""
from .main import distributed_console

if __name__ == "__main__":
    distributed_console()
