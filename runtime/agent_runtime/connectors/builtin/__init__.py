"""The built-in connector types. Each module here that defines a `BuiltinConnector` subclass with a `type`
registers it (see `registry.py`): adding a type is dropping in a module, with no change anywhere else."""
