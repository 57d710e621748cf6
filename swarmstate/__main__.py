"""``python -m swarmstate``: the same command as the ``swarmstate`` console script."""

from swarmstate.cli import main

raise SystemExit(main())
