"""Moved to :mod:`tecomp.workloads.builders` (the CLI needs it, and production code never imports
tecomp.testing); kept here so that tests and scripts importing this name go on working."""
from ..workloads.builders import *  # noqa: F403
from ..workloads.builders import __all__  # noqa: F401
