"""The ``trade`` command: a click root whose subcommands all come from plugins."""

from __future__ import annotations

import importlib
import importlib.metadata
import os
import sys

import click

from trade_core import env, hookspecs
from trade_core.errors import TradeError
from trade_core.logging import configure_logging
from trade_core.plugins import ENTRY_POINT_GROUP, TradePluginManager, get_manager, listed_plugins
from trade_core.registry import Clash, Registry

COMMANDS = Registry(hookspecs.trade_register_commands, "command", click.Command)


def _versions(manager: TradePluginManager) -> str:
    plugins = sorted({f"{o.dist}-{o.version}" for o in manager.origins.values()})
    return "plugins: " + ", ".join(plugins)


class TradeGroup(click.Group):
    """A group that turns :class:`TradeError` into one line on stderr and exit status 2, and says when a command
    is missing because the plugin allow-list left its plugin out."""

    def invoke(self, ctx: click.Context) -> object:
        try:
            return super().invoke(ctx)
        except TradeError as exc:
            click.echo(f"error: {exc.one_line()}", err=True)
            ctx.exit(2)

    def resolve_command(
        self, ctx: click.Context, args: list[str]
    ) -> tuple[str | None, click.Command | None, list[str]]:
        allowed = os.environ.get(env.LOAD_PLUGINS)
        if allowed is not None and args and not args[0].startswith("-") and self.get_command(ctx, args[0]) is None:
            installed = {ep.name for ep in importlib.metadata.entry_points(group=ENTRY_POINT_GROUP)}
            unknown = sorted((listed_plugins(env.LOAD_PLUGINS) or set()) - installed)
            named = f"; no installed plugin is called {', '.join(map(repr, unknown))}" if unknown else ""
            ctx.fail(
                f"No such command {args[0]!r}: {env.LOAD_PLUGINS}={allowed} loads only the plugins it names{named} "
                f"(installed: {', '.join(sorted(installed))}; unset it to load them all)"
            )
        return super().resolve_command(ctx, args)


class LazyGroup(click.Group):
    """A group whose subcommands are ``module:attribute`` strings, imported on first use (``--help`` stays fast)."""

    def __init__(self, *args: object, lazy: dict[str, str], **kwargs: object) -> None:
        super().__init__(*args, **kwargs)  # type: ignore[arg-type]
        self.lazy = lazy

    def list_commands(self, ctx: click.Context) -> list[str]:
        return sorted({*super().list_commands(ctx), *self.lazy})

    def get_command(self, ctx: click.Context, cmd_name: str) -> click.Command | None:
        if cmd_name in self.lazy:
            module, attribute = self.lazy[cmd_name].split(":")
            return getattr(importlib.import_module(module), attribute)
        return super().get_command(ctx, cmd_name)


def build_cli(manager: TradePluginManager) -> click.Group:
    """The root group with every plugin's commands attached."""

    @click.group(cls=TradeGroup, context_settings={"help_option_names": ["-h", "--help"]})
    @click.option("--log-json", is_flag=True, envvar=env.LOG_JSON, help="Log JSON lines instead of console text.")
    @click.option(
        "--log-level",
        type=click.Choice(["debug", "info", "warning", "error"]),
        default="info",
        show_default=True,
        help="Lowest level of log events shown.",
    )
    @click.version_option(message=f"trade %(version)s\n{_versions(manager)}", package_name="trade-core")
    def trade(log_json: bool, log_level: str) -> None:
        """trade-agent: agentic RL of LLM trading agents on China A-shares.

        Subcommands come from installed plugins; `trade plugins` lists them.
        """
        configure_logging(json=log_json, level=log_level)

    collected = COMMANDS.collected(manager)
    for provided in collected.items.values():
        trade.add_command(provided.item)
    for clash in collected.clashes:
        trade.add_command(_refused(clash))
    return trade


def _refused(clash: Clash) -> click.Command:
    """Stands in for a command name two plugins registered: ``--help`` shows the clash, running it refuses."""
    error = clash.error(COMMANDS.kind)

    def refuse() -> None:
        raise error

    dists = " and ".join(sorted({clash.first.origin.dist, clash.second.origin.dist}))
    return click.Command(
        clash.name,
        callback=refuse,
        help=error.one_line(),
        short_help=f"REFUSED: registered by two plugins ({dists}); see `trade plugins`.",
        add_help_option=False,  # `--help` refuses too: neither plugin's help would be the right one
        context_settings={"ignore_unknown_options": True, "allow_extra_args": True},
    )


def main(argv: list[str] | None = None) -> None:
    """Console-script entry point."""
    configure_logging(json=os.environ.get(env.LOG_JSON) == "1")
    try:
        manager = get_manager()
        cli = build_cli(manager)
    except TradeError as exc:
        click.echo(f"error: {exc.one_line()}", err=True)
        sys.exit(2)
    cli.main(args=argv, prog_name="trade")
