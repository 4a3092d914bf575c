"""Helpers shared by the test suite and the bench (peer brokers to compare against)."""
