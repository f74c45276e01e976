"""``trade eval dashboard``: a local web app over the run folders under ``--runs`` (backtests, tasks runs,
plays and training records), read lazily so a folder of 10,000 episodes opens at once."""
