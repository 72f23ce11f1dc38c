"""CRI-O: a drop-in in ``/etc/crio/crio.conf.d`` registers the runtime (files only: no daemon)."""
