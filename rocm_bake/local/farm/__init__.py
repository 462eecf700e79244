"""A build farm on one machine: hosts as network namespaces on a bridge of the farm's own.

``make farm`` brings up ``builder-1`` and ``builder-2`` (buildkitd on TCP with
mutual TLS), ``registry`` (docker-registry, TLS, htpasswd basic auth),
``state`` (versitygw, an S3 bucket for Pulumi state) and ``gpu-node`` (sshd,
its host key pinned in a known_hosts the farm writes), each in a network
namespace joined by a veth pair to a bridge in this host's namespace. The
hosts' addresses come from 198.18.0.0/15 (RFC 2544 benchmarking space) and
exist only on those veths and the bridge, and no namespace has a default
route: no traffic can go anywhere but these addresses, and the host's
forwarding settings are never touched (bridged frames are not forwarded
by IP).

Everything a farm makes is named from its slot (``rbf<slot>``: the namespaces,
the bridge, the veths, the subnet ``198.18.<slot>.0/24``), claimed machine-wide
like the registry ports, so two checkouts each run a farm at once; its files
live under the checkout's ``.rocm-bake/farm/``. ``make farm-down`` removes
exactly those; a setup that fails half way is taken down the same way.

Modules: :mod:`layout` (names, addresses, paths), :mod:`slots` (the claim),
:mod:`net` (namespaces, veths, bridge), :mod:`hosts` (the daemons),
:mod:`farm` (up and down), :mod:`demo` (both demo stacks on it),
``__main__`` (the CLI the Makefile calls).
Standard library only, like the other local daemons' helpers.
"""
