"""trade-records: the records every run leaves and every reader opens, named and typed in one place.

- :mod:`trade_records.runfolder`: a run folder's files, manifests, day and episode records, summaries, resume;
- :mod:`trade_records.metrics`: a training step's metrics (``StepMetrics``) and a run's ``metrics.jsonl`` lines.

The JSONL line I/O they use (one appender, one reader that leaves out a partial last line) is
:mod:`trade_core.files`.
"""
