#!/usr/bin/python3
"""Stands in for the Python module's tests in a build without the module: says why and
reports itself skipped to ctest (exit 77)."""
import sys

print("skipped: the Python module was not built (" + " ".join(sys.argv[1:]) + "); install pybind11-dev and "
      "python3-dev (scripts/install-deps.sh) and configure again")
sys.exit(77)
