"""``python -m benchmarks.sections.server``: the section alone, a table of ratios."""

from benchmarks.sections.server.section import main

raise SystemExit(main())
