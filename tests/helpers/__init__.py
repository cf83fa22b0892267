"""Shared test helpers: real faults for real runs (`faults`)."""
