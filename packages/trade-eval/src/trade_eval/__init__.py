"""trade-eval: the multi-day backtest of a trading policy (a served LLM or a baseline), its metrics and report."""
