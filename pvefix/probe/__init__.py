"""Guest GPU probe: what the GPUs of this machine are, and whether P2P really moves data.

Every module here imports only the standard library and pydantic (or, where pydantic is
missing, its standard-library stand-in `_stdmodel`, so the probe runs in a bare guest as the
zipapp `pvefix verify` ships). PyTorch is used only by the worker scripts (`_p2p_worker.py`,
`_allreduce_worker.py`), which run in child processes with a timeout so a hung driver cannot
hang the probe.
"""
