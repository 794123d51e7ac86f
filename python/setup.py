"""pip install ./python (offline: setuptools only, no build isolation
needed).  When the tree is built, the library (../lib/.libs/libgradcomp.so,
or $GRADCOMP_LIB) is copied into the package, so the installed package
does not depend on the build tree; otherwise it looks for a `make install`ed
libgradcomp at import time."""
import os
import shutil

from setuptools import setup
from setuptools.command.build_py import build_py

HERE = os.path.dirname(os.path.abspath(__file__))


class build_with_lib(build_py):
    def run(self):
        super().run()
        src = os.environ.get("GRADCOMP_LIB") or os.path.join(
            HERE, "..", "lib", ".libs", "libgradcomp.so")
        if os.path.exists(src):
            dst = os.path.join(self.build_lib, "gradcomp", "libgradcomp.so")
            shutil.copyfile(os.path.realpath(src), dst)


setup(
    name="gradcomp",
    version="0.1.0",
    description="gradcomp's compressors, error feedback, probes and a DDP "
                "communication hook (ctypes over libgradcomp.so)",
    packages=["gradcomp"],
    python_requires=">=3.8",
    # numpy (and torch for gradcomp.torch) come from Debian
    # (python3-numpy, python3-torch): no PyPI dependency to resolve offline
    cmdclass={"build_py": build_with_lib},
)
