"""Guest GPU probe: what the GPUs of this machine are, and whether P2P really moves data.

Every module here imports only the standard library and pydantic; PyTorch is used only by the
worker scripts (`_p2p_worker.py`, `_allreduce_worker.py`), which run in child processes with a
timeout so a hung driver cannot hang the probe.
"""
