"""setuptools hook: with LIBMLA_LIBRARY set (a path to libmla.so.0, or the
build directory holding it) the library is copied into the installed
package, which then loads that copy first. Without it the package finds
libmla.so at run time (see libmla/_lib.py)."""

import os
import shutil

from setuptools import setup
from setuptools.command.build_py import build_py

SONAME = "libmla.so.0"


class BuildPy(build_py):
    def run(self):
        super().run()
        dst = os.path.join(self.build_lib, "libmla", SONAME)
        src = os.environ.get("LIBMLA_LIBRARY")
        if not src:
            if os.path.exists(dst):  # a copy from an earlier build in the same tree
                os.remove(dst)
            return
        if os.path.isdir(src):
            src = os.path.join(src, SONAME)
        if not os.path.exists(src):
            raise SystemExit("LIBMLA_LIBRARY=%s: no such library" % src)
        shutil.copyfile(os.path.realpath(src), dst)
        os.chmod(dst, 0o755)


setup(cmdclass={"build_py": BuildPy})
