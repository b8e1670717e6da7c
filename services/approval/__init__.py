"""Approval: writing a ticket into the project system exactly once, its claims and records, and the
connection check."""
