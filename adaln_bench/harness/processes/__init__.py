"""How processes run: the parent/child protocol, a mode's child, the runner that starts the children, the
cold-start check in a fresh process, the fork server, other interpreters, and stopping on a signal."""
