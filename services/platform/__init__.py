"""The ground every domain stands on: errors, database, cache, logs, web plumbing, serving, request
bodies, compression, assets, languages, mail and validation."""
