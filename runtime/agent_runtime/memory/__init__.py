"""The Memory server's logic (RUNNER_MODE=memory): semantic, episodic and taxonomic memory per Agent,
org, user and namespace, over SQLite or MongoDB, with local or HTTP embeddings.

Importing this package loads nothing heavy: `wire` is what the SDK shares; stores and models load on use.
"""
