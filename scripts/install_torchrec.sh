#!/usr/bin/env bash
# Installs TorchRec, fbgemm-gpu-cpu and torch from PyPI at the versions pinned
# in python/requirements-torchrec.txt, into a virtual environment of the Python
# embshard's Python package is built for (Debian's /usr/bin/python3), so that
# one interpreter imports both torchrec and embshard. Idempotent: does nothing
# when the environment already holds the pinned set. Prints its time and the
# bytes it received.
#   install_torchrec.sh            the environment at .venv-torchrec
#   EMBSHARD_TORCHREC_VENV=DIR     another place for it
# The environment's python is what `embshard plan/eval --algo torchrec_planner`,
# `bench kernel`'s FBGEMM peer and the TorchRec tests run (see docs/python.md).
set -euo pipefail
root="$(cd "$(dirname "$0")/.." && pwd)"
venv="${EMBSHARD_TORCHREC_VENV:-$root/.venv-torchrec}"
requirements="$root/python/requirements-torchrec.txt"
python=/usr/bin/python3

"$root/scripts/install_deps.sh" >&2  # python3, python3-venv among them

wanted="$(grep -v '^#' "$requirements" | grep -v '^$' | tr 'A-Z_' 'a-z-' | sort)"
installed() { "$venv/bin/python" -m pip freeze 2>/dev/null | tr 'A-Z_' 'a-z-' | sort; }
if [ -x "$venv/bin/python" ] && [ "$(installed)" = "$wanted" ] \
    && "$venv/bin/python" -c 'import torchrec, fbgemm_gpu' 2>/dev/null; then
  echo "install_torchrec: $venv holds the pinned set" >&2
  exit 0
fi

received() { awk 'NR > 2 && $1 != "lo:" { sum += $2 } END { printf "%.0f\n", sum }' /proc/net/dev; }
start=$(date +%s)
before=$(received)
echo "install_torchrec: installing $(echo "$wanted" | wc -l) pinned packages into $venv" >&2
rm -rf "$venv"
"$python" -m venv "$venv"
"$venv/bin/python" -m pip install --quiet --no-deps --only-binary=:all: -r "$requirements"
# The build tree's package, importable from the environment (scripts build into build/).
site="$("$venv/bin/python" -c 'import sysconfig; print(sysconfig.get_paths()["purelib"])')"
echo "${EMBSHARD_BUILD_DIR:-$root/build}/python" > "$site/embshard-build.pth"
"$venv/bin/python" -c 'import torch, fbgemm_gpu, torchrec' 2>/dev/null \
  || { echo "install_torchrec: the installed set does not import: $venv/bin/python -c 'import torchrec'" >&2; exit 1; }
after=$(received)
echo "install_torchrec: done in $(( $(date +%s) - start )) s, $(( (after - before) / 1000000 )) MB received," \
  "$(du -sm "$venv" | cut -f1) MB on disk: $venv/bin/python" >&2
