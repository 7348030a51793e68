#!/usr/bin/env bash
# Make Debian's Chromium ready for the browser tests in tests/browser/ (called by `make setup`;
# idempotent and silent when the browser is there): as root with apt-get, installs the
# `chromium` package when $RLWB_CHROMIUM (default /usr/bin/chromium) is missing.
# Playwright drives this system browser; `playwright install` (a download) is never used.
# A failed install does not stop set-up: the browser tests then skip with the reason, or fail
# where RLWB_REQUIRE_BROWSER=1 (as in CI), quoting the end of $LOG.
set -uo pipefail
CHROMIUM="${RLWB_CHROMIUM:-/usr/bin/chromium}"
LOG="${RLWB_CHROMIUM_LOG:-/tmp/rlwb-apt-chromium.log}"

[ -x "$CHROMIUM" ] && exit 0
if [ "$(id -u)" = 0 ] && command -v apt-get >/dev/null; then
  echo "browser: installing Debian's chromium for tests/browser (log: $LOG)"
  (apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends chromium) \
    >"$LOG" 2>&1
  [ -x "$CHROMIUM" ] && exit 0
  echo "browser: chromium is still missing at $CHROMIUM after apt-get; see $LOG" >&2
else
  echo "browser: $CHROMIUM is missing and this is not root with apt-get;" \
       "install Debian's chromium to run tests/browser (they skip without it)" >&2
fi
exit 0
