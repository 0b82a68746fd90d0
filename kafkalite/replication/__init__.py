"""Follower replication: fetching from leaders, truncation by leader epoch."""
