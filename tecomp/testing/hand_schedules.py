"""Moved to :mod:`tecomp.workloads.hand_schedules` (the CLI needs it, and production code never imports
tecomp.testing); kept here so that tests and scripts importing this name go on working."""
from ..workloads.hand_schedules import *  # noqa: F403
from ..workloads.hand_schedules import __all__  # noqa: F401
