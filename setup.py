"""Build hook: compile proto/*.proto into auditor/_proto before setuptools looks for packages.

Running the generator here (not in a build_py command) means the generated package is found by package
discovery in every kind of build: wheel, sdist -> wheel, and editable installs. Generated code is never
edited by hand or committed.
"""
import subprocess
import sys
from pathlib import Path

from setuptools import setup

subprocess.check_call([sys.executable, str(Path(__file__).resolve().parent / "scripts" / "gen_protos.py")])
setup()
