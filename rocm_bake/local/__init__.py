"""What runs on this machine for one checkout: its registry, builder, state server and farm.

Modules: :mod:`daemons` (is a pidfile's process this checkout's; stop it), :mod:`builder` (buildkitd,
registered with buildx), :mod:`registry` and :mod:`registry_server` (docker-registry over TLS),
:mod:`state_server` (versitygw, the team's state bucket), :mod:`farm` (hosts in network namespaces).
``python -m rocm_bake.local start|stop|status`` is the one way the Makefile starts and stops them.
Standard library only, except :mod:`registry_server` (the venv's ``make registry``).
"""
