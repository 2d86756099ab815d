"""``python -m mibyan_jupyter.testing``: the fake provider on localhost (see :mod:`.cli`)."""

import sys

from mibyan_jupyter.testing.cli import main

sys.exit(main())
