"""Environment variables that steer plugin loading and logging, named in one place."""

LOAD_PLUGINS = "TRADE_LOAD_PLUGINS"
"""Comma-separated allow-list of plugin (entry point) names; set but empty loads only essential ones."""

DISABLE_PLUGINS = "TRADE_DISABLE_PLUGINS"
"""Comma-separated plugin names never to load (essential plugins cannot be disabled)."""

STRICT_PLUGINS = "TRADE_STRICT_PLUGINS"
"""When ``1``, a plugin that fails to load or to register is fatal instead of skipped with an error line."""

TRACE_PLUGINS = "TRADE_TRACE_PLUGINS"
"""When ``1``, log a structlog event for every hook call."""

LOG_JSON = "TRADE_LOG_JSON"
"""When ``1``, log JSON lines instead of the human console format (same as ``--log-json``)."""

RUN = "TRADE_RUN"
"""The run a process works for (JSON of :class:`~trade_core.runs.RunContext`), set while a run is entered so the
processes it starts (a training launch, Ray's workers) hear it in their events; not for users to set."""
