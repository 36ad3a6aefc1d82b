"""``python -m tecomp.cli``: the ``tecomp`` command."""
import sys

from . import main

sys.exit(main())
