"""The version, written in this one place (``pyproject.toml`` reads it at build time:
``tool.hatch.version``), so that ``vmem --version`` answers without searching the
installed packages' metadata."""

__version__ = "0.1.0"
