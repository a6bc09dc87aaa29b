#!/usr/bin/env bash
# Install the Debian packages mrcstats' optional parts use (R + lme4 + car for the
# R engine and the parity tests, link-grammar for the offline parser, poppler for
# PDF checks, chromium for the HTML report checks). Runs apt-get only as root; elsewhere it says what is missing and
# carries on, since every part that needs them skips or falls back cleanly.
set -u
PKGS="r-base-core r-base-dev r-cran-lme4 r-cran-car r-cran-emmeans r-cran-sandwich r-cran-jsonlite r-cran-lmertest r-cran-pbkrtest r-cran-ordinal r-cran-glmmtmb r-cran-psych python3-link-grammar link-grammar-dictionaries-en poppler-utils chromium"
missing=""
for p in $PKGS; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing="$missing $p"
done
[ -z "$missing" ] && exit 0
if [ "$(id -u)" = "0" ] && command -v apt-get >/dev/null 2>&1; then
  echo "sysdeps: installing$missing" >&2
  export DEBIAN_FRONTEND=noninteractive
  apt-get update -qq >/dev/null 2>&1 || true
  apt-get install -y -qq --no-install-recommends $missing >/dev/null 2>&1 \
    || apt-get install -y -qq $missing >/dev/null \
    || echo "sysdeps: apt-get failed; R parity and link-grammar tests will skip" >&2
else
  echo "sysdeps: not root; missing Debian packages:$missing (R parity and link-grammar tests will skip)" >&2
fi
exit 0
