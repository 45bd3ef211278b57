"""Builds braid._braid with braid's own CMake and packages it with the Python sources.

    pip install --no-build-isolation --no-index ./python            # builds in a temp dir
    BRAID_BUILD_DIR=build-py pip install --no-build-isolation --no-index ./python
                                                                    # reuses (and updates) a build
    BRAID_PREBUILT_MODULE=build-py/python/braid/_braid...so pip install ...   # no build at all

The module is built for the interpreter running pip (Python3_EXECUTABLE), with pybind11 from
pybind11-dev, the interpreter's pybind11 package, or BRAID_PYBIND11_INCLUDE_DIR.
"""

import glob
import os
import shutil
import subprocess
import sys

from setuptools import Extension, setup
from setuptools.command.build_ext import build_ext

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(HERE)


class CMakeBuild(build_ext):
    def build_extension(self, ext):
        dest = self.get_ext_fullpath(ext.name)
        os.makedirs(os.path.dirname(dest), exist_ok=True)
        prebuilt = os.environ.get("BRAID_PREBUILT_MODULE")
        if prebuilt:  # a module the project's CMake already built (tests, packaging)
            shutil.copyfile(prebuilt, dest)
            return
        build = os.environ.get("BRAID_BUILD_DIR")
        build = os.path.join(ROOT, build) if build and not os.path.isabs(build) else build
        if not build:
            build = os.path.abspath(os.path.join(self.build_temp, "cmake"))
        # A venv's interpreter shares its base interpreter's headers and ABI; naming the base
        # one keeps a reused build directory's configuration unchanged.
        python = getattr(sys, "_base_executable", None) or sys.executable
        args = ["-DCMAKE_BUILD_TYPE=" + os.environ.get("BRAID_BUILD_TYPE", "RelWithDebInfo"),
                "-DBRAID_WITH_PYTHON=ON", "-DPython3_EXECUTABLE=" + python]
        if os.environ.get("BRAID_PYBIND11_INCLUDE_DIR"):
            args.append("-DBRAID_PYBIND11_INCLUDE_DIR=" + os.environ["BRAID_PYBIND11_INCLUDE_DIR"])
        args += os.environ.get("BRAID_CMAKE_ARGS", "").split()
        subprocess.check_call(["cmake", "-S", ROOT, "-B", build] + args)
        jobs = os.environ.get("BRAID_BUILD_JOBS", str(os.cpu_count() or 2))
        subprocess.check_call(["cmake", "--build", build, "--target", "braid_python", "-j", jobs])
        built = glob.glob(os.path.join(build, "python", "braid", "_braid*.so"))
        if not built:
            raise RuntimeError(f"braid: the build in {build} produced no _braid module")
        shutil.copyfile(built[0], dest)


setup(
    packages=["braid", "braid.torch"],
    package_dir={"braid": "braid", "braid.torch": "braid/torch"},
    ext_modules=[Extension("braid._braid", sources=[])],
    cmdclass={"build_ext": CMakeBuild},
    zip_safe=False,
)
