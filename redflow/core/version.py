"""The package's version (``redflow.__version__``), where the worker record and traces read it."""

VERSION = "0.1.0"
