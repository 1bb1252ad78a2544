"""How pvefix reaches a node: settings (profiles, environment, flags, ready file), the HTTPS
API (proxmoxer, checked TLS), SSH (paramiko, checked host keys) and the local backend.

Only the settings load here; the API and SSH modules import proxmoxer and paramiko, so they load
when a command needs them.
"""

from pvefix.target.settings import ENV_VARS, Connection, resolve_connection

__all__ = ["ENV_VARS", "Connection", "resolve_connection"]
