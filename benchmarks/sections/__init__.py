"""The benchmark sections, one module (or package, with its helpers) per section of ``run.py``."""
