"""Build hook: compile the cffi API-mode module ``dlbind._api`` from the generated builder.

Set ``DLBIND_NO_COMPILE=1`` to build without a C compiler; dlbind then runs on its pure build
(cffi ABI mode), which is also what ``DLBIND_PURE=1`` selects at run time.
"""

import os

from setuptools import setup

compile_ext = os.environ.get("DLBIND_NO_COMPILE", "") in ("", "0")
setup(cffi_modules=["src/dlbind/_generated/build_api.py:ffibuilder"] if compile_ext else [])
