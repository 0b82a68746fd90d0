"""Test helpers shared across tiers (real processes, fixtures); imported by tests/conftest.py."""
