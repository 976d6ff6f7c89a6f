"""rtxcore's version: the file VERSION beside this one, the one version source of
all four distributions (each pyproject.toml reads it; each backend's package
holds a link to it, read the same way at import)."""

import os

with open(os.path.join(os.path.dirname(os.path.abspath(__file__)), "VERSION")) as _f:
    __version__ = _f.read().strip()
del _f
