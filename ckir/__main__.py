"""``python -m ckir``: the ``ckir`` command (``torchrun ... -m ckir train --distributed``)."""

import sys

from ckir.cli import main

sys.exit(main())
