"""The four built-in tools, registered through the ``trade_register_tools`` hook like any plugin's."""
