"""``trl-grpo``: multi-turn GRPO on one machine (CPU or one GPU) with TRL's ``GRPOTrainer(environment_factory=...)``."""
