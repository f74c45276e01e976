"""trade-data: A-share daily bars as Qlib datasets, and a point-in-time ``MarketStore`` over them."""

from importlib.metadata import version

__version__ = version("trade-data")
