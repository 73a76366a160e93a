"""Fetch the manifest's real models into the cache and verify them (the same as `edgeinf fetch`).

Usage: python tools/fetch_models.py [NAME ...] [--list]    (all models when no name is given)
"""

import sys

from edgeinf.cli import main

if __name__ == "__main__":
    sys.exit(main(["fetch", *sys.argv[1:]]))
