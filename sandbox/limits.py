"""Limits shared by the ops: what fits into one reply, and how many processes a session may
run where the daemon bounds them (gVisor: see ``pidwatch``)."""

import os

from .protocol import DEFAULT_MAX_FRAME, DEFAULT_MAX_HEADER

# Largest blob a reply may carry: the frame limit minus room for the header.
MAX_BLOB = DEFAULT_MAX_FRAME - 2 * 1024 * 1024
# Budget for the JSON of a listing in a reply header (the rest of the header is small).
MAX_LISTING = DEFAULT_MAX_HEADER - 256 * 1024
# Most output a background task may keep per stream.
MAX_OUTPUT_MAX = 1024 * 1024 * 1024
# Processes the session may hold under gVisor (0: bounded by the kernel's pids cgroup alone).
PROCESSES = int(os.environ.get("CAISSON_PROCESSES") or 0)
# The niceness every command starts with (clone_exec.c sets the same): the daemon, at 0, is
# served first when the agent's processes fill the session's CPU (a fork loop spinning at the
# process limit starved it past a call's deadline before it could end the loop). A command
# cannot lower it again (that needs CAP_SYS_NICE).
COMMAND_NICE = 10
