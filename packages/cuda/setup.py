# Build hook of a dlbind backend: its version is the core's, pinned (docs/releasing.md): read from the core's
# __version__ in a clone, from the sdist's own PKG-INFO in an sdist (which holds no core). The same file in every
# backend (tests/test_distribution_files.py keeps the copies identical).
import re
import sys
from pathlib import Path

from setuptools import setup

here = Path(__file__).resolve().parent
source = next((p for p in (here / "PKG-INFO", here.parent / "core/src/dlbind/__init__.py") if p.is_file()), None)
text = source.read_text(encoding="utf-8") if source else sys.exit(f"no PKG-INFO in {here} and no core beside it")
version = re.search(r'^(?:Version: |__version__ = ")([^"\s]+)', text, re.M)[1]
setup(version=version, install_requires=[f"dlbind=={version}", "cffi>=1.17"])
