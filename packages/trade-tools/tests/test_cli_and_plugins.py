"""`trade tools` commands as a user runs them, and prompt sets / tools as plugins."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from trade_core import hookimpl
from trade_core.plugins import get_manager
from trade_core.testing import imports_of, inline_plugin, run_trade
from trade_tools.episode import EpisodeSettings
from trade_tools.prompts import PromptSet


@pytest.mark.parametrize("args", [["tools", "--help"], ["tools", "call", "--help"], ["tools", "play", "--help"]])
def test_help_imports_no_numpy_or_pandas(args: list[str], tmp_path: Path) -> None:
    assert imports_of(*args, tmp_path=tmp_path) & {"numpy", "pandas"} == set()


@pytest.mark.parametrize("args", [["tools", "list"], ["tools", "list", "--json"]])
def test_listing_the_tools_imports_no_numpy_or_pandas(args: list[str], tmp_path: Path) -> None:
    """Names, descriptions and schemas are declarations: only a tool's ``run`` needs the arrays."""
    assert imports_of(*args, tmp_path=tmp_path) & {"numpy", "pandas"} == set()


def test_list_shows_the_four_tools() -> None:
    run = run_trade("tools", "list", "--json")
    assert run.code == 0, run.err
    names = [t["function"]["name"] for t in json.loads(run.out)]
    assert names == ["get_price_data", "get_macro_indicators", "compute_alpha_factor", "TakeAction"]


def test_call_prints_the_text_and_fails_on_error_texts(sample_dataset: Path) -> None:
    base = ["tools", "call", "--data", str(sample_dataset), "--date", "2024-06-14", "--pool", "SH600519,SZ000001"]
    run = run_trade(*base[:2], "get_macro_indicators", *base[2:], "--args", '{"index": "SH000905"}')
    assert run.code == 0 and "中证500(SH000905)" in run.out
    run = run_trade(*base[:2], "get_price_data", *base[2:], "--args", '{"symbol": "SH601318"}')
    assert run.code == 1 and run.out.startswith("错误：SH601318 不在股票池中")
    run = run_trade(*base[:2], "get_price_data", *base[2:-2], "--date", "2024-06-15", "--args", "{}")
    assert run.code == 2 and run.err.strip() == (
        "error: 2024-06-15 is not a trading day (the trading day before is 2024-06-14)"
    )


def test_play_a_scripted_day_and_save_the_trajectory(sample_dataset: Path, tmp_path: Path) -> None:
    script = (
        "\n".join(
            [
                "state",
                'get_price_data {"symbol": "SH600519", "period": "10d", "indicators": ["MA5", "RSI_14"]}',
                "buy SH600519 100",
                "sell SZ000001 100",
                "stop 白酒企稳，小仓位试探",
            ]
        )
        + "\n"
    )
    out = tmp_path / "day.jsonl"
    run = run_trade(
        "tools",
        "play",
        "--data",
        str(sample_dataset),
        "--date",
        "2024-06-14",
        "--pool",
        "SH600519,SZ000001",
        "--holdings",
        "SZ000001=1000",
        "--save",
        str(out),
        input=script,
    )
    assert run.code == 0, run.err
    assert "===== SYSTEM =====" in run.out and "市场状态（截至2024-06-14收盘" in run.out
    assert "成交：买入SH600519 100股" in run.out and "状态：stopped" in run.out
    [line] = out.read_text().splitlines()
    trajectory = json.loads(line)
    assert trajectory["episode"]["status"] == "stopped" and trajectory["source"] == "play"
    assert [m["role"] for m in trajectory["messages"]][:3] == ["system", "user", "assistant"]
    assert trajectory["messages"][-1]["content"].startswith("已结束今日交易")


def test_a_prompt_set_from_a_plugin_is_selected_by_name(open_day) -> None:  # type: ignore[no-untyped-def]
    terse = PromptSet("terse", "one line each", system=lambda e: f"交易{e.task.date}", user=lambda e: "开始")

    class Plugin:
        @hookimpl
        def trade_register_prompt_sets(self, register):  # type: ignore[no-untyped-def]
            register(terse)

    with inline_plugin(get_manager(), Plugin(), "terse-prompts"):
        day = open_day("2024-06-14", ["SH600519"], settings=EpisodeSettings(prompt_set="terse"))
        assert day.messages() == [{"role": "system", "content": "交易2024-06-14"}, {"role": "user", "content": "开始"}]


def test_tool_descriptions_in_the_system_prompt_are_switchable(open_day) -> None:  # type: ignore[no-untyped-def]
    with_tools = open_day("2024-06-14", ["SH600519"]).messages()[0]["content"]
    without = open_day("2024-06-14", ["SH600519"], settings=EpisodeSettings(inject_tool_descriptions=False))
    assert "## 可用工具\n- get_price_data(symbol: string, period: string（可选）" in with_tools
    assert "## 可用工具" not in without.messages()[0]["content"]


def test_every_tools_subcommand_has_help() -> None:
    for command in ("list", "call", "play"):
        run = run_trade("tools", command, "--help")
        assert run.code == 0 and f"Usage: trade tools {command}" in run.out
