"""``prefix-grpo``: multi-turn GRPO on CPU whose rollouts and learning pass read each shared prompt once."""
