"""Routing: which budget code each ticket line lands on, and what it learns from the PMs' decisions."""
