"""Everything that depends on an instance's kind: one Backend per kind of server, and the
registry that picks one."""
