"""trade-train: trainers (plugins) that teach the trading agent; verl GRPO on Ray is built in."""

from importlib.metadata import version

__version__ = version("trade-train")
