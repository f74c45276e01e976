"""``trade quickstart``: the whole loop on one machine without a GPU, as the project's first command.

A market (the synthetic one unless ``--data``), embargoed tasks, the tiny Qwen3 taught the tool-call protocol on
a baseline policy's real episodes, GRPO with ``trl-grpo``, held-out evaluation before and after beside the
baselines, a short backtest and a report. Each stage calls the Python API its own command uses; finished stages
are recorded in ``OUT/quickstart.json`` so an interrupted run resumes. One module per concern: ``settings`` (what
a run is), ``stages`` (the resumable runner), ``demonstrations`` (the fine-tune's episodes), ``pipeline`` (the
stages), ``learning`` (the per-step numbers) and ``report`` (the page).
"""
