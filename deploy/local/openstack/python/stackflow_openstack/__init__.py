"""Helpers that let stackflow's local stack run OpenStack services from Debian's libraries alone."""
