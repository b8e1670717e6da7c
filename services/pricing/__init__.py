"""Pricing: rate sheets, markups, pricing a ticket's lines, and not-to-exceed authorisations."""
