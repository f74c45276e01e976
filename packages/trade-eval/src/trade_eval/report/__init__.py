"""The backtest report: run folders read as they are (:mod:`.runs`), the charts (:mod:`.charts`) and one
self-contained HTML page (:mod:`.page`). Nothing is imported here, so the dashboard can read runs without
loading matplotlib."""
