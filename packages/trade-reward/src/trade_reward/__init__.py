"""trade-reward: forward returns, r_outcome, reward schemes (plugins) and the daily task builder."""

from importlib.metadata import version

__version__ = version("trade-reward")
