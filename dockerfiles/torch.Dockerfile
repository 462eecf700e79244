# PyTorch for one PYTORCH_ROCM_ARCH value (a ;-list makes one fat binary).
# pytorch-base and triton-wheel arrive as named build contexts pinned by digest.
FROM pytorch-base AS build
ARG PYTORCH_ROCM_ARCH
ARG ROCM_VERSION
ARG PYTORCH_REF=main
ARG USE_ROCM_CK_SDPA_GFX12=0
ARG AMDGPU_SCHED_STRATEGY=
COPY --from=triton-wheel /wheels/ /deps/
RUN python3 -m pip install --no-cache-dir /deps/triton-*.whl
RUN git clone --depth 1 --branch "${PYTORCH_REF}" --recurse-submodules --shallow-submodules https://github.com/pytorch/pytorch /src/pytorch
WORKDIR /src/pytorch
# The arch is deliberately not in the version: one index must resolve torch
# the same on every machine; the index path and metapackage carry the arch.
RUN sha="$(git rev-parse --short=7 HEAD)" && \
    export PYTORCH_BUILD_VERSION="$(cat version.txt)+git${sha}.rocm${ROCM_VERSION}" PYTORCH_BUILD_NUMBER=1 && \
    export USE_ROCM_CK_SDPA=${USE_ROCM_CK_SDPA_GFX12} && \
    if [ -n "${AMDGPU_SCHED_STRATEGY}" ]; then export HIPCC_COMPILE_FLAGS_APPEND="-mllvm -amdgpu-sched-strategy=${AMDGPU_SCHED_STRATEGY}"; fi && \
    python3 tools/amd_build/build_amd.py && python3 -m pip wheel --no-deps --no-build-isolation -w /dist .

FROM scratch AS wheels
COPY --from=build /dist/*.whl /wheels/
