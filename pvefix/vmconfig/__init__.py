"""The VM config model: lossless files, typed property strings, Proxmox's own checks."""

from pvefix.vmconfig.config import Line, Problem, Section, VMConfig
from pvefix.vmconfig.hostpci import HostPci
from pvefix.vmconfig.machine import Machine
from pvefix.vmconfig.propstring import PropertyString

__all__ = ["HostPci", "Line", "Machine", "Problem", "PropertyString", "Section", "VMConfig"]
