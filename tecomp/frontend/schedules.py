"""The schedule a fused group gets when the tuning log has no record for it: the CPU default of
:mod:`tecomp.schedule.cpu_default`."""
from ..schedule.cpu_default import default_cpu_schedule as default_schedule

__all__ = ["default_schedule"]
