"""A VM's guest, reached one of two ways: the QEMU guest agent over the Proxmox API
(`agent.AgentChannel`) or SSH to the guest itself (`ssh.SshChannel`). Both are a `GuestChannel`
(`channel.py`): upload a file, run an argument list, read a file, replace a file. `access.py`
holds the settings that choose and configure the way in; `pvefix.target.open.open_guest` opens
a channel."""
