"""trade-distill: keep the good trajectories of a trained agent (``trade distill``)."""

__version__ = "0.1.0"
