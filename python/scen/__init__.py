"""scen's Python side, installed by ``pip install scen`` beside the ``scen`` binary.

The binary does the work; this package holds what must run inside a user's own Python
process (the recorder that ``scen record`` loads into a job). ``__version__`` is the
installed distribution's version, the same as ``scen --version``.
"""

from importlib.metadata import PackageNotFoundError, version

try:
    __version__ = version("scen")
except PackageNotFoundError:  # imported from a source tree, not installed
    __version__ = "0+unknown"
