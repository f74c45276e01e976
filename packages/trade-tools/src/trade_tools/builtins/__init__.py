"""The four built-in tools, registered through the ``trade_register_tools`` hook like any plugin's.

A tool module imports what its name, description and schema need; what computes its answer (numpy, the
store, the indicator tables) is imported by its ``run``, so listing the tools (``trade tools list``, a
plugin listing) imports neither numpy nor pandas.
"""
