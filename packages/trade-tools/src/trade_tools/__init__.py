"""trade-tools: the one-day trading Episode, its four tools, A-share execution rules and prompts."""

from importlib.metadata import version

__version__ = version("trade-tools")
