"""The ledger shared through Redis and Redis Cluster: its format, its reads, and values nobody vouches for."""
