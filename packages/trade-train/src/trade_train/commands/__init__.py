"""``trade train`` and ``trade model``: one module per command group, imported when used."""
