# Demo stand-in for pytorch-base: the same stage, args and pruning step, on a
# base made on this machine (debootstrap: python3, gcc, binutils) and pushed
# to the local registry by `make demo-base`; nothing is pulled.
ARG ROCM_IMAGE=127.0.0.1:5000/rocm-bake/demo-base:bookworm-1
FROM ${ROCM_IMAGE} AS base
ARG PYTORCH_ROCM_ARCH
ARG ROCM_PRUNE_KEEP
ARG CACHE_ARCH
ENV PYTORCH_ROCM_ARCH=${PYTORCH_ROCM_ARCH}
RUN test -n "${PYTORCH_ROCM_ARCH}" || { echo "PYTORCH_ROCM_ARCH build arg is required" >&2; exit 1; }
# rocm-prune stand-in: record what the real step keeps for this arch.
RUN mkdir -p /opt/rocm && printf '%s\n' ${ROCM_PRUNE_KEEP} > /opt/rocm/prune-keep && \
    printf '%s\n' "${PYTORCH_ROCM_ARCH}" > /opt/rocm/pytorch-rocm-arch
COPY demo_build.py /usr/local/bin/demo_build.py
