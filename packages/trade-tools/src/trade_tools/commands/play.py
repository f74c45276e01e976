"""``trade tools play``: trade one day by hand with the agent's tools, prompts and rules."""

from __future__ import annotations

import json
import sys
from pathlib import Path

import click

from trade_tools.commands.options import ANONYMIZE_NOISE, DayChoice, day_options

HELP = """Commands:
  NAME {{JSON}}     call a tool, e.g.  get_price_data {{"symbol": "{symbol}", "period": "20d"}}
  buy SYMBOL N    shorthand for TakeAction buy, e.g.  buy {symbol} 100;  sell SYMBOL N  likewise;  stop [REASON]
  tools           the tool schemas          prompt   the system and user prompts again
  state           cash, holdings, value     help     this text
  quit            leave (stopped or not; --save writes the day), as end of input (Ctrl-D) does"""


def _shorthand(line: str) -> tuple[str, str]:
    head, _, rest = line.partition(" ")
    if head in ("buy", "sell"):
        parts = rest.split()
        args: dict[str, object] = {"type": head, "symbol": parts[0] if parts else ""}
        if len(parts) > 1:
            args["amount"] = int(parts[1]) if parts[1].isdigit() else parts[1]
        return "TakeAction", json.dumps(args, ensure_ascii=False)
    if head == "stop":
        return "TakeAction", json.dumps({"type": "stop", "reasoning": rest}, ensure_ascii=False)
    return head, rest.strip() or "{}"


@click.command("play", short_help="Trade one day yourself with the agent's tools and prompts.")
@click.option(
    "--save",
    type=click.Path(dir_okay=False, path_type=Path),
    help="Write the finished day as a trajectory (JSONL file; checked before the day is played).",
)
@day_options
def play_command(
    save: Path | None,
    choice: DayChoice,
) -> None:
    """An interactive session: read the prompts the model gets, call tools, trade, stop.

    Reads commands from stdin (one per line), so it can be scripted; `quit` or the end of input ends the
    session. Type `help` for the commands. Exit status 1 when the day was left without `stop`.
    """
    from trade_tools.day import TradingDay
    from trade_tools.trajectory import write_trajectories

    trading = TradingDay(choice.open())
    episode = trading.episode
    for message in trading.messages:
        click.echo(f"===== {message.role.upper()} =====\n{message.content}\n")
    click.echo(_info("help", episode))
    while (line := _read_line()) is not None:
        if not line:
            continue
        if line in ("quit", "exit"):
            break
        if line in ("help", "tools", "prompt", "state"):
            click.echo(_info(line, episode))
            continue
        try:
            name, arguments = _shorthand(line)
        except ValueError as error:
            click.echo(f"错误：{error}")
            continue
        was_open = trading.is_open
        [answer] = trading.turn("", [(name, arguments)])
        click.echo(answer)
        if was_open and not trading.is_open:
            click.echo(f"the day is over ({episode.status}): `quit` or end of input (Ctrl-D) leaves", err=True)
    else:
        click.echo("\nend of input: leaving as `quit` does")
    value = episode.value()
    click.echo(
        f"\n状态：{episode.status}；组合总值 {value:,.2f} 元（开始 {episode.value_before:,.2f}，"
        f"交易成本 {episode.costs_paid():,.2f}）；持仓 {episode.final_holdings() or '空仓'}"
    )
    if save:
        write_trajectories(save, [trading.to_trajectory("play")])
        click.echo(f"trajectory written to {save}")
    if episode.status != "stopped":
        sys.exit(1)


def _read_line() -> str | None:
    """The next command, or None at the end of input (Ctrl-D or a script's end); Ctrl-C still aborts."""
    click.echo("trade> ", nl=False, err=True)
    try:
        return input().strip()
    except EOFError:
        return None


def _info(what: str, episode) -> str:  # type: ignore[no-untyped-def]
    if what == "help":
        return HELP.format(symbol=episode.hide(episode.task.pool[0]))  # an example that runs on this pool
    if what == "tools":
        return json.dumps(episode.tool_schemas(), ensure_ascii=False, indent=2)
    if what == "prompt":
        return "\n\n".join(m["content"] for m in episode.messages())
    positions, count = episode.positions, episode.count  # in units of each stock's scale when anonymized
    held = ", ".join(
        f"{s} {count(s, positions[s].shares)}(可卖{count(s, positions[s].sellable)})"
        for s in episode.shown_order(sorted(positions))
    )
    held = held or "空仓"
    return episode.hide(f"现金 {episode.cash:,.2f}；持仓 {held}；组合总值 {episode.value():,.2f}")


play_command.params.append(ANONYMIZE_NOISE)
