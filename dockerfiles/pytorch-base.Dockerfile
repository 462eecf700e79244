# ROCm toolchain + Python build deps, pruned to one arch's device libraries.
# Per-arch (cache scoped by CACHE_ARCH): rocm-prune keeps only the
# -gfxNNNN packages named in ROCM_PRUNE_KEEP.
ARG ROCM_IMAGE=rocm/dev-ubuntu-24.04:10.1-complete
FROM ${ROCM_IMAGE} AS base
ARG PYTORCH_ROCM_ARCH
ARG ROCM_PRUNE_KEEP
ARG CACHE_ARCH
ENV PYTORCH_ROCM_ARCH=${PYTORCH_ROCM_ARCH}
RUN test -n "${PYTORCH_ROCM_ARCH}" || { echo "PYTORCH_ROCM_ARCH build arg is required" >&2; exit 1; }
# rocm-prune: drop every arch-suffixed ROCm package except the kept ones.
RUN set -eu; keep_re="($(echo ${ROCM_PRUNE_KEEP} | tr ' ' '|'))\$"; \
    dpkg-query -W -f '${Package}\n' | grep -E -- '-gfx[0-9a-f]+$' | grep -Ev -- "${keep_re}" \
      | xargs --no-run-if-empty apt-get purge -y; \
    apt-get autoremove -y; rm -rf /var/lib/apt/lists/*
RUN python3 -m pip install --no-cache-dir build wheel cmake ninja packaging
