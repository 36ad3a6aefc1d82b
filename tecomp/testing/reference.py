"""Moved to :mod:`tecomp.workloads.reference` (the CLI needs it, and production code never imports
tecomp.testing); kept here so that tests and scripts importing this name go on working."""
from ..workloads.reference import *  # noqa: F403
from ..workloads.reference import __all__  # noqa: F401
