# Triton compiles no device code at build time, so its cache stays on the
# shared ref for every arch (see manifests/targets.yml: device_code: false).
ARG PYTHON_IMAGE=python:3.14-slim
FROM ${PYTHON_IMAGE} AS build
ARG TRITON_REF=main
ARG ROCM_VERSION
RUN apt-get update && apt-get install -y --no-install-recommends git build-essential && rm -rf /var/lib/apt/lists/*
RUN git clone --depth 1 --branch "${TRITON_REF}" https://github.com/triton-lang/triton /src/triton
WORKDIR /src/triton
RUN sha="$(git rev-parse --short=7 HEAD)" && \
    TRITON_WHEEL_VERSION_SUFFIX="+git${sha}.rocm${ROCM_VERSION}" python3 -m pip wheel --no-deps -w /dist . && \
    python3 -m pip wheel --no-deps -w /dist python/triton_kernels

# Only wheels in the final stage: the fetcher extracts /wheels/*.whl.
FROM scratch AS wheels
COPY --from=build /dist/*.whl /wheels/
