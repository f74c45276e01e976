"""The Python half of scripts/gpu-learning.sh: build the wheels that travel, check what the GPU machine has, and
read the learning figures back from a quickstart run folder.

    python3 scripts/gpu_learning.py build WHEELS     # here: our wheels and TRL's (pip wheel --no-deps)
    python3 scripts/gpu_learning.py check [gpu|cpu]  # there: every runtime need, one line; exit 3 if one is missing
    python3 scripts/gpu_learning.py report RUN       # there: speed, GPU memory and what the run learned

``check`` and ``report`` use the standard library and ``packaging`` only (what the machine has before our wheels).
"""

from __future__ import annotations

import json
import os
import re
import statistics
import subprocess
import sys
from collections.abc import Iterator
from importlib import metadata
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
PACKAGES = ("trade-core", "trade-data", "trade-tools", "trade-reward", "trade-records", "trade-train", "trade-eval")
"""What ``trade quickstart`` imports (trade-distill it does not)."""
NEEDS = ("trade-train[quickstart]", "trade-eval[local]", *PACKAGES)
"""What the check walks from: the quickstart's install line, each requirement down to the last."""
GPU_CSV = "gpu.csv"
"""nvidia-smi's samples during the run (MiB used, MiB total, % busy), written by gpu-learning.sh."""
SUMMARY = "gpu-learning.json"
LEARNING = (
    ("trade/reward/score/mean", "reward", "+.3f"),
    ("trade/stop_rate", "stop rate", ".0%"),
    ("trade/tool_error_rate", "tool-error rate", ".0%"),
    ("trade/failure/no_valid_call", "no valid call", ".0%"),
    ("trade/zero_variance_groups", "zero-variance groups", ".0%"),
)


def build(wheels: Path) -> None:
    """Our packages as wheels, and TRL's at the version trade-train's ``trl`` extra names, into ``wheels``."""
    wheels.mkdir(parents=True, exist_ok=True)
    pip = [sys.executable, "-m", "pip", "wheel", "--no-deps", "-q", "-w", str(wheels)]
    subprocess.run([*pip, *(str(ROOT / "packages" / name) for name in PACKAGES)], check=True)
    [train] = wheels.glob("trade_train-*.whl")
    subprocess.run([*pip, trl_requirement(train)], check=True)
    for wheel in sorted(wheels.glob("*.whl")):
        print(f"{wheel.stat().st_size / 1e6:6.2f} MB  {wheel}")


def trl_requirement(train_wheel: Path) -> str:
    """TRL's requirement in trade-train's metadata (``trl>=1.16,<1.17; extra == "trl"``), without the marker."""
    import zipfile

    with zipfile.ZipFile(train_wheel) as archive:
        name = next(n for n in archive.namelist() if n.endswith(".dist-info/METADATA"))
        text = archive.read(name).decode("utf-8")
    for line in text.splitlines():
        found = re.match(r"Requires-Dist: (trl\b[^;]*)", line)
        if found:
            return found.group(1).strip()
    raise SystemExit(f"{train_wheel} names no trl requirement")


def walk(roots: tuple[str, ...]) -> Iterator[tuple[str, str, str | None]]:
    """Every requirement reachable from ``roots`` through the installed distributions' metadata, their markers
    evaluated with the extras asked for: (requirement, who asked, installed version or None)."""
    from packaging.requirements import Requirement

    seen: set[tuple[str, frozenset[str]]] = set()
    queue = [(Requirement(root), "the quickstart") for root in roots]
    while queue:
        wanted, by = queue.pop(0)
        try:
            dist = metadata.distribution(wanted.name)
        except metadata.PackageNotFoundError:
            yield str(wanted), by, None
            continue
        yield str(wanted), by, dist.version
        key = (canonical(wanted.name), frozenset(wanted.extras))
        if key in seen:
            continue
        seen.add(key)
        asker = f"{wanted.name}[{','.join(sorted(wanted.extras))}]" if wanted.extras else wanted.name
        for line in dist.requires or []:
            need = Requirement(line)
            if need.marker is None or any(need.marker.evaluate({"extra": e}) for e in wanted.extras or {""}):
                queue.append((need, asker))


def canonical(name: str) -> str:
    return re.sub(r"[-_.]+", "-", name).lower()


def check(device: str) -> int:
    """One line: what is missing (and who needs it), what is there in another version than asked, and the GPU;
    3 when something is missing or, for ``device`` gpu, torch sees no CUDA device (the run would fail), else 0."""
    from packaging.requirements import Requirement

    missing: dict[str, list[str]] = {}
    other: list[str] = []
    for text, by, version in walk(NEEDS):
        need = Requirement(text)
        if version is None:
            missing.setdefault(canonical(need.name), []).append(by)
        elif need.specifier and not need.specifier.contains(version, prereleases=True):
            other.append(f"{need.name} {version} ({by} wants {need.specifier})")
    parts = []
    if missing:
        parts.append("missing " + ", ".join(f"{name} (for {askers(by)})" for name, by in sorted(missing.items())))
    if other:
        parts.append("other versions: " + ", ".join(sorted(set(other))))
    gpu = cuda_line() if "torch" not in missing else None
    if gpu is not None:
        parts.append(gpu)
    fatal = bool(missing) or (device == "gpu" and (gpu is None or "no CUDA" in gpu))
    print(("check: " if fatal else "check ok: ") + "; ".join(parts or ["everything found"]), flush=True)
    return 3 if fatal else 0


def askers(names: list[str]) -> str:
    """Who needs a package, by distribution (extras left out), the first three and how many more."""
    found = sorted({name.split("[")[0] for name in names})
    return ", ".join(found[:3]) + (f" +{len(found) - 3}" if len(found) > 3 else "")


def cuda_line() -> str:
    """torch's version, its CUDA and the device it sees, or why it sees none."""
    import torch

    if not torch.cuda.is_available():
        return f"torch {torch.__version__} sees no CUDA device (its CUDA: {torch.version.cuda})"
    return f"torch {torch.__version__}, CUDA {torch.version.cuda}, {torch.cuda.get_device_name(0)}"


def report(run: Path) -> None:
    """Print and write ``RUN/gpu-learning.json``: the model's size, each stage's time, GRPO steps/s and rollout
    tokens/s over the GRPO stage, the GPU's peak memory and how busy it was, and the learning figures (the
    metrics of the first and last steps, the held-out rewards, trained against untrained, the backtest)."""
    state = json.loads((run / "quickstart.json").read_text(encoding="utf-8"))
    settings, stages = state["settings"], {name: f["seconds"] for name, f in state["finished"].items()}
    result = {"settings": settings, "stage_seconds": stages, "model": model_size(run / "model")}
    print(
        f"model: {result['model']['layers']} layers, hidden {result['model']['hidden']}, "
        f"{result['model']['parameters'] / 1e6:.1f} M parameters"
    )
    print("stages: " + ", ".join(f"{name} {seconds:.0f} s" for name, seconds in stages.items()))
    steps = metric_lines(run / "grpo" / "metrics.jsonl")
    if "grpo" in stages:
        seconds = stages["grpo"]
        tokens, rollouts = rollout_tokens(run / "grpo", run / "model")
        result["grpo"] = {
            "steps": len(steps),
            "steps_per_s": len(steps) / seconds,
            "rollouts": rollouts,
            "rollout_tokens": tokens,
            "rollout_tokens_per_s": tokens / seconds,
        }
        print(
            f"grpo: {len(steps)} steps in {seconds:.0f} s = {len(steps) / seconds:.3f} steps/s; {rollouts} "
            f"rollouts, {tokens:,} assistant tokens = {tokens / seconds:,.0f} rollout tokens/s"
        )
    result["gpu"] = gpu_use(run / GPU_CSV)
    if result["gpu"]:
        g = result["gpu"]
        print(
            f"gpu: peak {g['peak_mib']:,} of {g['total_mib']:,} MiB used, {g['busy_mean']:.0f}% busy on average "
            f"({g['samples']} samples)"
        )
    if steps:
        result["learning"] = learning(steps)
        for label, (first, last) in result["learning"].items():
            print(f"learning {label}: {first} -> {last}")
    result["evaluate"] = held_out(run / "evaluate", settings.get("reward", ""))
    for side, line in result["evaluate"].items():
        print(f"held-out {side}: {line}")
    compared = run / "evaluate" / "compare.json"
    if compared.is_file():
        result["verdict"] = json.loads(compared.read_text(encoding="utf-8"))["verdicts"][0]
        print(f"trained against untrained: {result['verdict']}")
    result["backtest"] = backtests(run / "backtest")
    for side, line in result["backtest"].items():
        print(f"backtest {side}: {line}")
    (run / SUMMARY).write_text(json.dumps(result, indent=2) + "\n", encoding="utf-8")
    print(f"written: {run / SUMMARY}")


def model_size(folder: Path) -> dict[str, int]:
    config = json.loads((folder / "config.json").read_text(encoding="utf-8"))
    weights = sum(f.stat().st_size for f in folder.glob("*.safetensors"))
    return {"layers": config["num_hidden_layers"], "hidden": config["hidden_size"], "parameters": weights // 2}


def metric_lines(path: Path) -> list[dict]:
    lines = path.read_text(encoding="utf-8").splitlines() if path.is_file() else []
    return [json.loads(line) for line in lines if line.strip()]


def rollout_tokens(grpo: Path, model: Path) -> tuple[int, int]:
    """The tokens the model wrote over every rollout (each assistant message's reasoning, text and tool calls,
    tokenized again with the model's tokenizer; template markers not counted), and the number of rollouts."""
    from transformers import AutoTokenizer

    tokenizer = AutoTokenizer.from_pretrained(model)
    tokens = rollouts = 0
    for path in sorted((grpo / "rollouts" / "trajectories").glob("*.jsonl")):
        for line in path.read_text(encoding="utf-8").splitlines():
            rollouts += 1
            for message in json.loads(line)["messages"]:
                if message["role"] != "assistant":
                    continue
                calls = [
                    f"{c['function']['name']} {c['function']['arguments']}" for c in message.get("tool_calls") or []
                ]
                text = "\n".join(filter(None, [message.get("reasoning_content"), message.get("content"), *calls]))
                tokens += len(tokenizer(text, add_special_tokens=False)["input_ids"])
    return tokens, rollouts


def gpu_use(path: Path) -> dict[str, float] | None:
    rows = (
        [[float(v) for v in line.split(",")] for line in path.read_text().splitlines() if line.strip()]
        if path.is_file()
        else []
    )
    if not rows:
        return None
    return {
        "peak_mib": int(max(r[0] for r in rows)),
        "total_mib": int(rows[0][1]),
        "busy_mean": statistics.fmean(r[2] for r in rows),
        "samples": len(rows),
    }


def learning(steps: list[dict]) -> dict[str, tuple[str, str]]:
    """Each metric's mean over the first and the last fifth of the steps (at least one step each)."""
    width = max(1, len(steps) // 5)
    found = {}
    for key, label, spec in LEARNING:
        values = [s[key] for s in steps if isinstance(s.get(key), int | float)]
        if values:
            first, last = statistics.fmean(values[:width]), statistics.fmean(values[-width:])
            found[f"{label}, mean over the first and the last {width} of {len(steps)} steps"] = (
                format(first, spec),
                format(last, spec),
            )
    return found


def held_out(folder: Path, scheme: str) -> dict[str, str]:
    """Each side's mean held-out reward with its interval, and its stop rate."""
    found = {}
    for path in sorted(folder.glob("*/summary.json")):
        summary = json.loads(path.read_text(encoding="utf-8"))
        mean, ci = summary["mean_reward"].get(scheme), summary["mean_reward_ci"].get(scheme)
        interval = f" [{ci[0]:+.3f}, {ci[1]:+.3f}]" if ci else ""
        found[path.parent.name] = (
            f"reward {mean:+.3f}{interval}, stop rate {summary['stop_rate']:.0%}, {summary['episodes']} episodes"
        )
    return found


def backtests(folder: Path) -> dict[str, str]:
    """Each model's backtest return against hold, with the note of a model that never traded."""
    from trade_eval.metrics import trading_note

    found = {}
    for path in sorted(folder.glob("*/summary.json")):
        rows = json.loads(path.read_text(encoding="utf-8"))["rows"]
        mine = rows["local"]
        note = trading_note(mine.get("trading"))
        found[path.parent.name] = f"{mine['total_return']:+.2%} (hold {rows['hold']['total_return']:+.2%})" + (
            f", {note}" if note else ""
        )
    return found


def main(argv: list[str]) -> int:
    command, *rest = argv or ["check"]
    if command == "build" and len(rest) == 1:
        build(Path(rest[0]))
        return 0
    if command == "check" and rest in ([], ["gpu"], ["cpu"]):
        return check(rest[0] if rest else "gpu")
    if command == "report" and len(rest) == 1:
        os.environ.setdefault("HF_HUB_OFFLINE", "1")
        report(Path(rest[0]))
        return 0
    print(__doc__, file=sys.stderr)
    return 2


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
