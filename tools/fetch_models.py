"""Fetch the manifest's real models into the cache and verify them.

Usage: python tools/fetch_models.py [NAME ...]    (all models when no name is given)
"""

import sys

from edgeinf import zoo

if __name__ == "__main__":
    for name, p in zoo.fetch_all(sys.argv[1:] or None).items():
        print(f"{name:36s} {p}")
