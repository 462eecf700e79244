# Demo stand-in for triton-wheel: no device code, no arch args, one shared
# cache ref for every arch (manifests/targets.yml: device_code: false).
ARG PYTHON_IMAGE=127.0.0.1:5000/rocm-bake/demo-base:bookworm-1
FROM ${PYTHON_IMAGE} AS build
ARG ROCM_VERSION
COPY demo_build.py /usr/local/bin/demo_build.py
RUN python3 /usr/local/bin/demo_build.py wheel --name triton --version "3.6.0+git1a2b3c4.rocm${ROCM_VERSION}" --out /dist && \
    python3 /usr/local/bin/demo_build.py wheel --name triton_kernels --version 1.0.0 --pure --out /dist

# Only wheels in the final stage: the fetcher extracts /wheels/*.whl.
FROM scratch AS wheels
COPY --from=build /dist/*.whl /wheels/
