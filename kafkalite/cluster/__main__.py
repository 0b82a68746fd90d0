import sys

from kafkalite.cluster.cli import main

sys.exit(main())
