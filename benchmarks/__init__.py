"""Throughput measurements. Speed is measured here, side by side, never asserted in tests."""
