"""What `trade eval backtest` and `trade eval tasks` share, defined once: the run-command layer.

- :func:`run_options`: the policy, the served model and its sampling, the memorisation guard; each option's
  default (and its help, where the field has a description) is read from :class:`~trade_eval.settings.RunSettings`,
  which the command then receives whole (``settings``);
- :func:`checked_policy`: the policy, a run it cannot play refused in one line before anything is loaded or written;
- :func:`run_manifest`: the manifest's provenance (the policy's distribution, the model's cutoff, warned about).

Heavy modules are imported inside the functions, so ``--help`` stays light.
"""

from __future__ import annotations

import datetime as dt
import re
from collections.abc import Callable, Sequence
from typing import TYPE_CHECKING, Any

import click

from trade_core.errors import TradeError
from trade_core.params import FiniteRange, grouped, settings_from
from trade_eval.memorisation import ANONYMIZE, MODEL_CUTOFF, warn_before_cutoff
from trade_eval.settings import RunSettings
from trade_tools.commands.options import ANONYMIZE_NOISE

if TYPE_CHECKING:
    from trade_eval.policy import Policy
    from trade_records.runfolder import RunManifest


def _setting(field: str, *decls: str, help: str | None = None, **kwargs: Any) -> Callable[[Any], Any]:
    """The option of a RunSettings field: its default and, unless ``help`` says more, its description."""
    info = RunSettings.model_fields[field]
    default = info.get_default(call_default_factory=True)
    kwargs.setdefault("show_default", default not in (None, ""))
    return click.option(*decls, field, default=default, help=help or f"{info.description}.".capitalize(), **kwargs)


def run_options(command: Callable[..., Any]) -> Callable[..., Any]:
    """Add the shared options to a run command; it receives ``policy_name`` and ``settings`` (a RunSettings of
    the options, and of a ``base_url`` option where the command has one)."""
    options = [
        click.option(
            "--policy",
            "policy_name",
            default="llm",
            show_default=True,
            help="Policy: llm, hold, equal-weight, momentum, random, or a plugin's (`trade plugins`).",
        ),
        _setting("model", "--model", help="The served model's name (OpenAI `model`); a folder for --policy local."),
        _setting(
            "api_key",
            "--api-key",
            envvar="OPENAI_API_KEY",
            show_default=False,
            help="API key of the server (default: $OPENAI_API_KEY or EMPTY; never written to the run).",
        ),
        _setting("temperature", "--temperature", type=FiniteRange(min=0), help="Sampling temperature."),
        _setting("top_p", "--top-p", type=FiniteRange(0, 1, min_open=True), help="Nucleus sampling (server default)."),
        _setting("max_tokens", "--max-tokens", type=click.IntRange(min=1), help="Completion tokens per request."),
        _setting(
            "request_timeout",
            "--request-timeout",
            type=FiniteRange(min=0, min_open=True),
            help="Seconds before a request is abandoned (then retried).",
        ),
        _setting(
            "retries",
            "--retries",
            type=click.IntRange(min=0),
            help="Retries of a failed request, with exponential backoff, before the day or episode is failed.",
        ),
        _setting(
            "seed",
            "--seed",
            type=click.IntRange(min=0),
            help="Seed of the model's sampling and the random baseline (and of a backtest's pool draw).",
        ),
        click.option(
            "--set",
            "options",
            multiple=True,
            metavar="KEY=VALUE",
            callback=lambda _ctx, _param, pairs: settings_from(pairs, example="backoff=2"),
            help="A policy option (repeatable).",
        ),
    ]
    command = grouped(settings=RunSettings)(command)
    for option in reversed(options):
        command = option(command)
    # click lists a command's options in the reverse of their decorators' order: these three come last
    command.__click_params__[:0] = [ANONYMIZE_NOISE, ANONYMIZE, MODEL_CUTOFF]  # type: ignore[attr-defined]
    return command


def checked_policy(name: str, settings: RunSettings, servers: Sequence[str] = ()) -> Policy:
    """The policy ``name``, refusing in one line a run it cannot play: a served model without a server (the
    settings' ``base_url``, or ``servers``) or a model name, or settings its check refuses (a backtest's server,
    a local model's folder). A tasks run's servers are checked once its tasks are read (:func:`check_servers`)."""
    from trade_eval.policy import POLICIES

    policy = POLICIES.get(name)
    if policy.needs_server and not ((settings.base_url or servers) and settings.model):
        raise TradeError(
            f"policy '{name}' needs a served model",
            hint="pass --base-url URL and --model NAME (`trade eval serve` prints a server command)",
        )
    policy.check(settings)
    return policy


def check_servers(policy: Policy, settings: RunSettings, servers: Sequence[str]) -> None:
    """Each server of the run answers (the policy's check with it), before anything is written."""
    for url in servers:
        policy.check(settings.model_copy(update={"base_url": url}))


def policy_dist(name: str) -> str:
    """The distribution that registered the policy ``name``, for the manifest."""
    from trade_core.plugins import get_manager
    from trade_eval.policy import POLICIES

    return POLICIES.provided(get_manager())[name].origin.dist


def run_manifest(manifest: RunManifest, cutoff: str | None, first_day: dt.date) -> RunManifest:
    """The manifest with the model's cutoff, warned about when the run's first day is before it."""
    manifest.model_cutoff = cutoff
    warn_before_cutoff(cutoff, first_day)
    return manifest


def run_label(policy: str, model: str, anonymized: bool) -> str:
    """Who played, for a default run folder's name: the model (or the policy), ``-anon`` when anonymized."""
    who = re.sub(r"[^A-Za-z0-9._-]+", "_", model.rstrip("/").rsplit("/", 1)[-1]) if model else policy
    return f"{who}-anon" if anonymized else who


def refuse_nothing_played(failed: int, total: int, what: str, out: Any) -> None:
    """A run whose every day (or episode) failed measured nothing: after its table, exit non-zero."""
    if total and failed == total:
        raise TradeError(
            f"all {total} {what} of {out} failed: the policy played none of them",
            hint=f"fix what the failure reasons say, then run again with a new --out ({out} keeps the failures)",
        )
