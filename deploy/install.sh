#!/usr/bin/env bash
# Install extra-work tickets on one Debian 12 machine, or upgrade it: run as root from a
# copy of the code (a git clone), with the domain name that points at this machine:
#
#   sudo ./deploy/install.sh tickets.example.com
#
# It installs the Debian packages, creates the service user `ewt`, copies the code to
# /opt/extra-work-tickets with its virtualenv, keeps the data in /var/lib/extra-work-tickets
# (config.py there is written once and never overwritten), applies the migrations,
# installs the systemd units and the Caddyfile and starts everything. Running it again
# with newer code upgrades: a backup first, then the new code, its dependencies and a
# restart, which applies the new migrations.
#
#   ./deploy/install.sh --config-only tickets.example.com
#
# only writes DATA_DIR/config.py when it is absent, needs no root and touches nothing else.
# PREFIX, DATA_DIR and BACKUP_DIR override the three folders above (and the units with them).
set -euo pipefail
umask 022

PREFIX=${PREFIX:-/opt/extra-work-tickets}
DATA_DIR=${DATA_DIR:-/var/lib/extra-work-tickets}
BACKUP_DIR=${BACKUP_DIR:-/var/backups/extra-work-tickets}
SERVICE_USER=ewt
SERVICE=extra-work-tickets
SOURCE=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
CADDY_MARK="# extra-work tickets (deploy/Caddyfile)"

die() {
  echo "install.sh: $*" >&2
  exit 1
}

usage() {
  die "usage: install.sh [--config-only] DOMAIN   (the name crews and managers will open, e.g. tickets.example.com)"
}

CONFIG_ONLY=0
if [[ ${1:-} == --config-only ]]; then
  CONFIG_ONLY=1
  shift
fi
[[ $# -eq 1 ]] || usage
DOMAIN=$1
[[ $DOMAIN =~ ^[A-Za-z0-9]([A-Za-z0-9.-]*[A-Za-z0-9])?$ ]] ||
  die "'$DOMAIN' is not a host name; give the bare name, without https:// or a path"

# The instance configuration, read by create_app() after its defaults (README, Configuration).
write_config() {
  local config=$DATA_DIR/config.py staged secret
  if [[ -e $config ]]; then
    echo "Keeping $config"
    return
  fi
  mkdir -p "$DATA_DIR"
  secret=$(python3 -c 'import secrets; print(secrets.token_hex(32))')
  staged=$(mktemp "$DATA_DIR/.config.py.XXXXXX")
  cat >"$staged" <<CONFIG
# Written by deploy/install.sh; edit freely, it is never overwritten. Settings: README.md.
SECRET_KEY = "$secret"
PUBLIC_BASE_URL = "https://$DOMAIN"
TRUSTED_PROXIES = 1
SESSION_COOKIE_SECURE = True
CONFIG
  mv "$staged" "$config"
  echo "Wrote $config"
}

if ((CONFIG_ONLY)); then
  write_config
  exit 0
fi

[[ $(id -u) -eq 0 ]] || die "run as root (sudo), or use --config-only"
[[ $PREFIX == /?*/* ]] || die "PREFIX must be a folder at least two levels below /"
command -v apt-get >/dev/null || die "this script is for Debian 12 (apt-get not found)"
[[ -f $SOURCE/app.py && -f $SOURCE/pyproject.toml ]] || die "$SOURCE does not hold the code"

# The units and the Caddyfile name the default folders; write them with the chosen ones.
render() {
  sed -e "s#/opt/extra-work-tickets#$PREFIX#g" \
      -e "s#/var/lib/extra-work-tickets#$DATA_DIR#g" \
      -e "s#/var/backups/extra-work-tickets#$BACKUP_DIR#g" \
      -e "s#tickets\.example\.com#$DOMAIN#g" "$1"
}

echo "== Debian packages"
export DEBIAN_FRONTEND=noninteractive
apt-get update -qq
# Pango, HarfBuzz, fontconfig and a font: WeasyPrint renders the signed ticket document with them.
packages=(python3 python3-venv git sqlite3 libpango-1.0-0 libpangoft2-1.0-0 libharfbuzz0b
  libharfbuzz-subset0 libfontconfig1 fonts-dejavu-core)
if apt-cache show caddy >/dev/null 2>&1; then
  packages+=(caddy)
fi
apt-get install -y -qq "${packages[@]}" >/dev/null
# Debian's own Python: one in root's home (pyenv and the like) is out of the service's reach.
PYTHON=/usr/bin/python3
"$PYTHON" -c 'import sys; sys.exit(sys.version_info < (3, 11))' || die "Python 3.11 or newer is needed"

echo "== User $SERVICE_USER and folders"
id -u "$SERVICE_USER" >/dev/null 2>&1 ||
  useradd --system --user-group --home-dir "$DATA_DIR" --no-create-home \
    --shell /usr/sbin/nologin "$SERVICE_USER"
install -d -o "$SERVICE_USER" -g "$SERVICE_USER" -m 0750 "$DATA_DIR"
install -d -o "$SERVICE_USER" -g "$SERVICE_USER" -m 0700 "$BACKUP_DIR"
write_config
chown "root:$SERVICE_USER" "$DATA_DIR/config.py"
chmod 0640 "$DATA_DIR/config.py"

# An upgrade starts with a backup, unless nightly backups are off (as on PostgreSQL).
if systemctl is-enabled --quiet "$SERVICE-backup.timer" 2>/dev/null; then
  echo "== Backup before the upgrade"
  systemctl start "$SERVICE-backup.service"
fi
if systemctl is-active --quiet "$SERVICE"; then
  systemctl stop "$SERVICE"
fi
if systemctl is-active --quiet "$SERVICE-webhooks"; then
  systemctl stop "$SERVICE-webhooks"
fi

echo "== Code in $PREFIX"
mkdir -p "$PREFIX"
if [[ $SOURCE != "$(cd "$PREFIX" && pwd)" ]]; then
  # Replace the previous copy entirely (a file removed upstream must not linger), keeping the venv.
  find "$PREFIX" -mindepth 1 -maxdepth 1 ! -name .venv -exec rm -rf {} +
  tar -C "$SOURCE" --exclude=./.git --exclude=./.venv --exclude=./instance \
    --exclude=./bench/out --exclude=./*.egg-info --exclude=.pytest_cache --exclude=__pycache__ \
    -cf - . |
    tar -C "$PREFIX" -xf -
fi
if ! runuser -u "$SERVICE_USER" -- "$PREFIX/.venv/bin/python" -c '' 2>/dev/null; then
  rm -rf "$PREFIX/.venv"
  "$PYTHON" -m venv "$PREFIX/.venv"
fi
"$PREFIX/.venv/bin/pip" install --quiet --disable-pip-version-check -e "$PREFIX"
PYTHON="$PREFIX/.venv/bin/python" "$PREFIX/bin/compile-translations"

echo "== Migrations"
(cd "$PREFIX" && runuser -u "$SERVICE_USER" -- env EWT_INSTANCE_PATH="$DATA_DIR" \
  "$PREFIX/.venv/bin/flask" --app app db upgrade)

echo "== systemd units"
for unit in "$SERVICE.service" "$SERVICE-sandbox.service" "$SERVICE-backup.service" \
  "$SERVICE-backup.timer" "$SERVICE-reminders.service" "$SERVICE-reminders.timer" \
  "$SERVICE-records.service" "$SERVICE-records.timer" \
  "$SERVICE-digest.service" "$SERVICE-digest.timer" \
  "$SERVICE-webhooks.service" "$SERVICE-sweep.service" "$SERVICE-sweep.timer"; do
  render "$SOURCE/deploy/$unit" >"/etc/systemd/system/$unit"
  chmod 0644 "/etc/systemd/system/$unit"
done
render "$SOURCE/deploy/ewt-admin" >/usr/local/bin/ewt-admin
chmod 0755 /usr/local/bin/ewt-admin
systemctl daemon-reload
systemctl enable --quiet "$SERVICE.service" "$SERVICE-backup.timer" "$SERVICE-reminders.timer" \
  "$SERVICE-webhooks.service" \
  "$SERVICE-records.timer" \
  "$SERVICE-digest.timer" \
  "$SERVICE-sweep.timer"
if systemctl is-enabled --quiet "$SERVICE-sandbox.service"; then
  systemctl restart "$SERVICE-sandbox.service"
fi
systemctl restart "$SERVICE.service" "$SERVICE-webhooks.service"
systemctl start "$SERVICE-backup.timer" "$SERVICE-reminders.timer" "$SERVICE-records.timer" "$SERVICE-sweep.timer"
systemctl start "$SERVICE-digest.timer"
"$PREFIX/.venv/bin/python" -c "import urllib.request
urllib.request.urlopen('http://127.0.0.1:8000/v1/openapi.json', timeout=30)" ||
  die "the service does not answer on 127.0.0.1:8000; see: journalctl -u $SERVICE"

echo "== Caddy"
if command -v caddy >/dev/null; then
  if [[ -f /etc/caddy/Caddyfile ]] && ! grep -qxF "$CADDY_MARK" /etc/caddy/Caddyfile; then
    cp /etc/caddy/Caddyfile /etc/caddy/Caddyfile.before-ewt
  fi
  { echo "$CADDY_MARK"; render "$SOURCE/deploy/Caddyfile"; } >/etc/caddy/Caddyfile
  caddy validate --config /etc/caddy/Caddyfile --adapter caddyfile >/dev/null 2>&1 ||
    die "Caddy refuses /etc/caddy/Caddyfile; check it with: caddy validate --config /etc/caddy/Caddyfile"
  systemctl enable --quiet caddy
  systemctl reload-or-restart caddy
  URL="https://$DOMAIN"
else
  URL="http://127.0.0.1:8000 (on this machine only)"
  cat <<CADDY

Caddy is not in this machine's package lists (Debian 12 has it in bookworm main), so
nothing answers on ports 80 and 443 yet. Install Caddy from your distribution and
run this script again, or put another HTTPS reverse proxy in front of 127.0.0.1:8000
that sets X-Forwarded-For, X-Forwarded-Proto and X-Forwarded-Host, limits request
bodies to 34 MiB and keeps no access log: $SOURCE/deploy/Caddyfile shows how.
CADDY
fi

cat <<NEXT

Extra-work tickets runs at $URL
  code     $PREFIX         data     $DATA_DIR
  backups  $BACKUP_DIR (nightly, kept 14 days)
  logs     journalctl -u $SERVICE

Next steps, as root (README.md, "Self-hosting"); ewt-admin runs the app's commands as $SERVICE_USER:
  1. Create your company; it prints its id:
       ewt-admin companies create --name "Your Firm"
  2. Create a reviewer login for a project manager (the password is asked for; --admin may make API keys):
       ewt-admin reviewers create --company 1 --email pm@example.com --admin
  3. Connect Procore (README.md, "Connecting a real Procore company"):
       ewt-admin project-system connect --company 1 --environment production \\
         --client-id ID --procore-company-id N
  4. Make a first backup now and see it listed:
       systemctl start $SERVICE-backup && ls $BACKUP_DIR
NEXT
