"""``python -m fedprint``: the ``fedprint`` command (:func:`fedprint.cli.main.main`)."""

import sys

from fedprint.cli.main import main

sys.exit(main())
