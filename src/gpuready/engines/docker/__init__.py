"""Docker: ``/etc/docker/daemon.json`` edited in place, dockerd reloaded and asked over its API."""
