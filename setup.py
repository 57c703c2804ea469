"""Build hook: compile proto/*.proto into auditor/_proto before packaging.

Generated code is never edited by hand or committed; `scripts/gen_protos.py` does the same for editable
installs and is what the set-up step runs.
"""
import subprocess
import sys
from pathlib import Path

from setuptools import setup
from setuptools.command.build_py import build_py


class BuildWithProtos(build_py):
    def run(self) -> None:
        subprocess.check_call([sys.executable, str(Path(__file__).parent / "scripts" / "gen_protos.py")])
        super().run()


setup(cmdclass={"build_py": BuildWithProtos})
