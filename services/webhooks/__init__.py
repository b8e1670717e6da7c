"""Webhooks: the events a company subscribes to, signed and delivered with retries."""
