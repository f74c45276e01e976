"""Built-in commands of trade-core, registered as a plugin like any other."""
