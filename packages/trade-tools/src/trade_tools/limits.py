"""How long a day may run, where ``--help`` can read it: the Episode's module imports the market data and numpy."""

MAX_TURNS = 16
"""Assistant replies a day allows by default (the prompt states the limit; training passes it to verl)."""
