#!/usr/bin/env bash
# Steps after `pip install` into the project venv ($1 = venv python).
# Each step is optional and quiet when its system piece is absent.
set -u
PY="${1:-.venv/bin/python}"

# --- features: link-grammar (Debian's python3-link-grammar, built for the system CPython 3.11).
# Expose ONLY its `linkgrammar` package to the venv: <venv>/lib/mrcstats-syslinks/linkgrammar is a
# symlink to the Debian package directory (Python files + _clinkgrammar .so), and a .pth in the venv's
# site-packages adds that one directory to sys.path. Skipped when the ABI tags differ.
lg_init="$(dpkg -L python3-link-grammar 2>/dev/null | grep '/linkgrammar/__init__\.py$' | head -n1)"
if [ -n "$lg_init" ] && [ -x "$PY" ]; then
  lg_dir="$(dirname "$lg_init")"
  "$PY" - "$lg_dir" <<'EOF' || echo "post_install: link-grammar not linked into the venv (see above)" >&2
import glob, os, sys, sysconfig
lg_dir = sys.argv[1]
suffix = sysconfig.get_config_var("EXT_SUFFIX")
if not glob.glob(os.path.join(lg_dir, "_clinkgrammar*" + suffix)):
    sys.exit(f"post_install: {lg_dir} has no _clinkgrammar{suffix} for this Python")
links = os.path.join(sys.prefix, "lib", "mrcstats-syslinks")
os.makedirs(links, exist_ok=True)
target = os.path.join(links, "linkgrammar")
if os.path.islink(target) or os.path.exists(target):
    os.remove(target)
os.symlink(lg_dir, target)
pth = os.path.join(sysconfig.get_paths()["purelib"], "mrcstats-linkgrammar.pth")
with open(pth, "w") as fh:
    fh.write(links + "\n")
EOF
fi

exit 0
