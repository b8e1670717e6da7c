# Copy to instance/config.py (or to the data folder of a self-hosted install) and edit.
# Every setting is optional; see README "Configuration" for the full table.

# Where crews reach the service; capture links and QR codes are built on it.
# PUBLIC_BASE_URL = "https://tickets.example.com"

# One reverse proxy (Caddy) in front: believe its X-Forwarded-* headers.
# TRUSTED_PROXIES = 1
# SESSION_COOKIE_SECURE = True

# Several workers or app servers: PostgreSQL and one shared Redis for the rate limits.
# DATABASE_URL = "postgresql://tickets:secret@127.0.0.1/tickets"
# RATELIMIT_STORAGE_URI = "redis://127.0.0.1:6379/0"
# ...and one bucket for the files (deploy/bucket.md; `flask storage migrate` writes these).
# STORAGE_URL = "s3://acme-tickets/files"
# S3_ENDPOINT_URL = "https://s3.example.com"
# BACKUP_KEY_FILE = "/var/lib/extra-work-tickets/backup.key"

# API_RATE_LIMIT = "120 per minute"
# CAPTURE_RATE_LIMIT = "30 per minute;600 per day"
