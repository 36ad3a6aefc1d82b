"""Moved to :mod:`tecomp.workloads.networks` (the CLI needs it, and production code never imports
tecomp.testing); kept here so that tests and scripts importing this name go on working."""
from ..workloads.networks import *  # noqa: F403
from ..workloads.networks import __all__  # noqa: F401
