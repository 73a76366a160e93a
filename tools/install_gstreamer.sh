#!/usr/bin/env bash
# GStreamer, its RTSP server and PyGObject for edgeinf's GStreamer sources and their tests.
# Usage (root, Debian/Ubuntu): bash tools/install_gstreamer.sh [VENV_PYTHON]   (default .venv/bin/python)
#
# PyGObject for the venv: Debian's python3-gi is linked into the venv when the venv's Python
# has the same major.minor as Debian's python3 (one ABI: no build); otherwise PyGObject is
# built from source (PyGObject 3.50 is the last to build against Debian 12's
# gobject-introspection 1.74; about 5 minutes on 2 cores).
set -euo pipefail
cd "$(dirname "$0")/.."
VENV_PY=${1:-.venv/bin/python}

packages=(python3-gi gir1.2-gstreamer-1.0 gir1.2-gst-plugins-base-1.0 gstreamer1.0-plugins-base
  gstreamer1.0-plugins-good gir1.2-gst-rtsp-server-1.0)
need=()
for pkg in "${packages[@]}"; do
  dpkg -s "$pkg" >/dev/null 2>&1 || need+=("$pkg")
done
if [ ${#need[@]} -gt 0 ]; then
  apt-get update -qq
  DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends "${need[@]}"
fi

if "$VENV_PY" -c "import gi" 2>/dev/null; then
  :
elif [ "$("$VENV_PY" -c 'import sys; print(*sys.version_info[:2])')" = \
       "$(/usr/bin/python3 -c 'import sys; print(*sys.version_info[:2])')" ]; then
  site=$("$VENV_PY" -c 'import sysconfig; print(sysconfig.get_paths()["platlib"])')
  ln -sfn "$(/usr/bin/python3 -c 'import gi, os; print(os.path.dirname(gi.__file__))')" "$site/gi"
else
  DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends \
    libgirepository1.0-dev libcairo2-dev pkg-config gcc
  "$VENV_PY" -m pip install -q "pycairo==1.27.0" "PyGObject==3.50.0"
fi
"$VENV_PY" -c "import gi; gi.require_version('Gst', '1.0'); gi.require_version('GstRtspServer', '1.0'); \
from gi.repository import Gst; Gst.init(None); print('PyGObject', gi.__version__, Gst.version_string())"
