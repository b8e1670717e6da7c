"""Shared test and benchmark support: corpora, images, servers, proxies (tests/ and bench/ import it)."""
