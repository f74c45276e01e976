"""The built-in ``verl-grpo`` trainer: verl 0.9.1's GRPO with our Episode inside its agent loop."""
