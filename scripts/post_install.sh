#!/usr/bin/env bash
# Steps after `pip install` into the project venv ($1 = venv python).
# Each step is optional and quiet when its system piece is absent.
set -u
PY="${1:-.venv/bin/python}"
exit 0
