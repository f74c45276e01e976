"""`trade train export` on a real verl FSDP checkpoint: the merged HF folder holds exactly the saved weights.

The checkpoint is written the way verl 0.9.1's FSDP actor engine (workers/engine/fsdp/transformer_impl.py)
writes one: the HF model loaded in fp32, wrapped per decoder layer with FSDP1 (``strategy=fsdp``, the actor's
default) or FSDP2's ``fully_shard`` (``strategy=fsdp2``) on a ``("fsdp",)`` device mesh, then saved by verl's own
``FSDPCheckpointManager.save_checkpoint`` to ``checkpoints/global_step_N/actor``, two gloo ranks so the merger
really reassembles shards. Only what cannot run without an accelerator differs from the engine, each a no-op for
the saved files: FSDP1 gets ``device_id=cpu`` (verl passes the CUDA/NPU device; FSDP1 refuses CPU unless told)
and ``sync_module_states=False`` (a GPU-only broadcast; both ranks load the same weights from disk anyway);
FSDP2's ``fsdp2_load_full_state_dict`` is skipped because it moves the model to ``get_device_id()`` (CUDA-only)
and ``fully_shard`` already keeps the loaded values.
"""

from __future__ import annotations

import os
import socket
import subprocess
import sys
from pathlib import Path

import pytest

pytest.importorskip("verl")

import torch
from safetensors.torch import load_file
from transformers import AutoModelForCausalLM, AutoTokenizer

from trade_core.testing import run_trade
from trade_train.tiny.model import build_tiny_model

WORLD_SIZE = 2
STEP = 3

STRATEGIES = ("fsdp", "fsdp2")

# One rank of the actor, saving the tiny model under each strategy: argv = model folder, root folder, step.
# Run as `python -c` with torchrun's env vars; both strategies in one process so verl is imported once per rank.
SAVE_ACTOR = """
import sys
from pathlib import Path

import torch
import torch.distributed as dist
from torch.distributed.device_mesh import init_device_mesh
from torch.distributed.fsdp import FullyShardedDataParallel, MixedPrecision
from transformers import AutoModelForCausalLM, AutoTokenizer
from verl.utils.checkpoint.fsdp_checkpoint_manager import FSDPCheckpointManager
from verl.utils.fsdp_utils import apply_fsdp2, get_fsdp_wrap_policy
from verl.workers.engine.fsdp.utils import get_sharding_strategy

model_dir, root, step = sys.argv[1], Path(sys.argv[2]), int(sys.argv[3])
dist.init_process_group("gloo")
mesh = init_device_mesh("cpu", mesh_shape=(dist.get_world_size(),), mesh_dim_names=["fsdp"])
tokenizer = AutoTokenizer.from_pretrained(model_dir)
for strategy in sys.argv[4:]:
    module = AutoModelForCausalLM.from_pretrained(model_dir, dtype=torch.float32)
    if strategy == "fsdp":
        precision = MixedPrecision(param_dtype=torch.bfloat16, reduce_dtype=torch.float32, buffer_dtype=torch.float32)
        model = FullyShardedDataParallel(
            module, auto_wrap_policy=get_fsdp_wrap_policy(module), device_id=torch.device("cpu"), device_mesh=mesh,
            sharding_strategy=get_sharding_strategy(mesh), mixed_precision=precision, sync_module_states=False,
            use_orig_params=False,
        )
    else:
        apply_fsdp2(module, {"mesh": mesh, "reshard_after_forward": True}, {})
        model = module
    optimizer = torch.optim.AdamW(model.parameters(), lr=1e-6)
    manager = FSDPCheckpointManager(model=model, optimizer=optimizer, processing_class=tokenizer)
    manager.save_checkpoint(str(root / strategy / "checkpoints" / f"global_step_{step}" / "actor"), global_step=step)
dist.destroy_process_group()
"""


@pytest.fixture(scope="module")
def saved(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, Path]:
    """The tiny model and a folder with one run per strategy; ranks are separate processes, as Ray's workers are."""
    model = build_tiny_model(tmp_path_factory.mktemp("tiny") / "model")
    root = tmp_path_factory.mktemp("runs")
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]
    command = [sys.executable, "-c", SAVE_ACTOR, str(model), str(root), str(STEP), *STRATEGIES]
    ranks = []
    for rank in range(WORLD_SIZE):
        env = {
            **os.environ,
            "MASTER_ADDR": "127.0.0.1",
            "MASTER_PORT": str(port),
            "RANK": str(rank),
            "LOCAL_RANK": str(rank),
            "WORLD_SIZE": str(WORLD_SIZE),
        }
        ranks.append(subprocess.Popen(command, env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True))
    outputs = [process.communicate(timeout=120)[0] for process in ranks]
    for rank, (process, output) in enumerate(zip(ranks, outputs, strict=True)):
        assert process.returncode == 0, f"rank {rank} failed:\n{output[-3000:]}"
    return model, root


@pytest.mark.parametrize("strategy", STRATEGIES)
def test_export_merges_a_real_fsdp_checkpoint_into_the_same_weights(
    strategy: str, saved: tuple[Path, Path], tmp_path: Path
) -> None:
    """A run's checkpoints/ folder (its global_step_N found) exports to a HF folder that loads as the saved model."""
    model, root = saved
    checkpoints = root / strategy / "checkpoints"
    actor = checkpoints / f"global_step_{STEP}" / "actor"
    assert {p.name for p in actor.glob("model_world_size_*.pt")} == {
        f"model_world_size_{WORLD_SIZE}_rank_{rank}.pt" for rank in range(WORLD_SIZE)
    }
    assert (actor / "fsdp_config.json").is_file() and (actor / "huggingface" / "config.json").is_file()

    hf = tmp_path / "hf"
    run = run_trade("train", "export", str(checkpoints), "--out", str(hf))
    assert run.code == 0, run.err
    assert f"merged {actor} -> {hf}" in run.out

    # bf16 like the tiny model, so the fp32 training copy rounds back to exactly the same values
    original = AutoModelForCausalLM.from_pretrained(model).state_dict()
    merged = AutoModelForCausalLM.from_pretrained(hf).state_dict()
    assert merged.keys() == original.keys()
    for name, weight in original.items():
        assert merged[name].dtype == weight.dtype == torch.bfloat16, name
        assert torch.equal(merged[name], weight), name
    # what vLLM reads: the weights file (tied lm_head left out, as in the original), and the same prompts and ids
    assert load_file(hf / "model.safetensors").keys() == load_file(model / "model.safetensors").keys()
    messages = [
        {"role": "user", "content": "买入 600519?"},
        {"role": "assistant", "content": "<think>\n想\n</think>\n\n好"},
    ]
    tools = [{"type": "function", "function": {"name": "buy", "parameters": {"type": "object", "properties": {}}}}]
    prompts = [
        AutoTokenizer.from_pretrained(folder).apply_chat_template(messages, tools=tools, return_dict=False)
        for folder in (model, hf)
    ]
    assert prompts[0] == prompts[1] and len(prompts[0]) > 50
