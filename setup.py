"""pip install --no-build-isolation . : the Python package embshard, its
extension built by CMake (python/CMakeLists.txt) for the Python running pip.

Offline: nothing is downloaded (the build needs the packages
scripts/install_deps.sh installs, pybind11-dev and python3-dev among them,
and setuptools and wheel in the Python running pip). The package carries the
shipped models/ and data/published/ inside it, and an `embshard-data-dir`
file saying "." so that the library finds them beside the extension.

The CMake build folder: $EMBSHARD_PIP_BUILD_DIR, else build-pip/<python version and path hash>
in the source tree (kept, so that a reinstall rebuilds only what changed). An
existing build folder is only built, not reconfigured; it must be configured
for this Python. $EMBSHARD_BUILD_JOBS: parallel jobs (default: all cores).
"""

import hashlib
import os
import re
import shutil
import subprocess
import sys

from setuptools import Extension, setup
from setuptools.command.build_ext import build_ext

ROOT = os.path.dirname(os.path.abspath(__file__))
# One build folder per Python (two installs of one version differ in headers and paths).
TAG = f"cpython-{sys.version_info.major}{sys.version_info.minor}-" + \
    hashlib.sha1(os.path.realpath(sys.executable).encode()).hexdigest()[:8]


# What planning loads, nothing measured: the same exclusions as the CMake
# install of models/ (cmake/install.cmake); data/published/ goes whole.
MODELS_EXCLUDED = ("*.jsonl.gz", "data", "*.svg", "report.md", "report.json", "__pycache__")
PACKAGE_DATA = {"models": shutil.ignore_patterns(*MODELS_EXCLUDED),
                os.path.join("data", "published"): None}


def version():
    with open(os.path.join(ROOT, "CMakeLists.txt"), encoding="utf-8") as f:
        return re.search(r"project\(embshard VERSION ([0-9.]+)", f.read()).group(1)


def cached_python(build_dir):
    """The Python3_EXECUTABLE an existing CMake build folder was configured with."""
    with open(os.path.join(build_dir, "CMakeCache.txt"), encoding="utf-8") as f:
        match = re.search(r"^Python3_EXECUTABLE:[A-Z]+=(.*)$", f.read(), re.MULTILINE)
    return match.group(1) if match else None


class CMakeBuild(build_ext):
    """Builds the extension target with CMake, then puts the module and the
    data it plans with into the package."""

    def build_extension(self, ext):
        build_dir = os.path.abspath(os.environ.get("EMBSHARD_PIP_BUILD_DIR")
                                    or os.path.join(ROOT, "build-pip", TAG))
        if os.path.exists(os.path.join(build_dir, "CMakeCache.txt")):
            python = cached_python(build_dir)
            if not python or os.path.realpath(python) != os.path.realpath(sys.executable):
                sys.exit(f"setup.py: {build_dir} is configured for Python {python}, not "
                         f"{sys.executable}: set EMBSHARD_PIP_BUILD_DIR to another folder")
        else:
            generator = ["-G", "Ninja"] if shutil.which("ninja") else []
            subprocess.run(["cmake", "-S", ROOT, "-B", build_dir, *generator,
                            "-DCMAKE_BUILD_TYPE=Release", "-DEMBSHARD_WITH_TORCH=OFF",
                            "-DEMBSHARD_PYTHON=ON", f"-DPython3_EXECUTABLE={sys.executable}"],
                           check=True)
        jobs = os.environ.get("EMBSHARD_BUILD_JOBS") or str(os.cpu_count() or 1)
        subprocess.run(["cmake", "--build", build_dir, "--target", "embshard_python", "-j", jobs],
                       check=True)
        built = os.path.join(build_dir, "python", "embshard")
        module = next(f for f in os.listdir(built) if f.startswith("_embshard.") and f.endswith(".so"))
        target = self.get_ext_fullpath(ext.name)
        package = os.path.dirname(target)
        os.makedirs(package, exist_ok=True)
        shutil.copyfile(os.path.join(built, module), target)
        # The data root is the package folder itself (util/data_dir.h).
        for data, ignore in PACKAGE_DATA.items():
            destination = os.path.join(package, data)
            shutil.rmtree(destination, ignore_errors=True)
            shutil.copytree(os.path.join(ROOT, data), destination, ignore=ignore)
        with open(os.path.join(package, "embshard-data-dir"), "w", encoding="utf-8") as f:
            f.write(".\n")


# setuptools' own folders out of the source tree and out of build/ (CMake's).
os.makedirs(os.path.join(ROOT, "build-pip"), exist_ok=True)
setup(
    name="embshard",
    version=version(),
    description="Plans how to shard DLRM embedding tables across devices (TorchRec plans)",
    python_requires=">=3.9",
    package_dir={"": "python"},
    packages=["embshard"],
    ext_modules=[Extension("embshard._embshard", sources=[])],
    cmdclass={"build_ext": CMakeBuild},
    options={"build": {"build_base": os.path.join("build-pip", "setuptools")},
             "egg_info": {"egg_base": "build-pip"}},
    zip_safe=False,
)
