# AITER JIT-compiles on first use; PREBUILD_KERNELS only buys first-inference
# latency. Level 0 everywhere by default; level 2 is refused off CDNA by the
# arch policy before this file is ever built (no wheel is produced there).
FROM pytorch-base AS build
ARG PYTORCH_ROCM_ARCH
ARG ROCM_VERSION
ARG AITER_REF=v0.1.28
ARG PREBUILD_KERNELS=0
COPY --from=torch /wheels/ /deps/
RUN python3 -m pip install --no-cache-dir /deps/torch-*.whl
RUN git clone --depth 1 --branch "${AITER_REF}" --recurse-submodules https://github.com/ROCm/aiter /src/aiter
WORKDIR /src/aiter
RUN sha="$(git rev-parse --short=7 HEAD)" && \
    GPU_ARCHS="${PYTORCH_ROCM_ARCH}" PREBUILD_KERNELS="${PREBUILD_KERNELS}" \
    SETUPTOOLS_SCM_PRETEND_VERSION="$(python3 setup.py --version 2>/dev/null | sed 's/+.*//')+git${sha}.rocm${ROCM_VERSION}" \
    python3 -m pip wheel --no-deps --no-build-isolation -w /dist .

FROM scratch AS wheels
COPY --from=build /dist/*.whl /wheels/
