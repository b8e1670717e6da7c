"""Files: the file store, photos and their pieces, the image pool, PDF rendering, quotas, sweeps
and backups."""
