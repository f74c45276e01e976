"""trade-core: the plugin registry and ``trade`` CLI root that every trade-agent package plugs into."""

from importlib.metadata import version

from trade_core.errors import PluginError, TradeError
from trade_core.hookspecs import hookimpl

__version__ = version("trade-core")
__all__ = ["PluginError", "TradeError", "__version__", "hookimpl"]
