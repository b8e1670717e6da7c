"""Accounts: companies, reviewers and their sign-in, API keys, and the request limits they are counted by."""
